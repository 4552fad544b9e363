// Command etcd is the etcd server, built from go.etcd.io/etcd/server/v3 (which has no
// main package of its own) for controller-runtime's envtest.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
