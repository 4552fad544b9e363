package ipamplugin

import "os"

var readFile = os.ReadFile
