package cli

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/netpool/netpool/cli/inventory"
)

// TestOutputDocColumns: docs/cli-output.md's table of columns is each command's table, in order,
// with -o wide's additions apart.
func TestOutputDocColumns(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "docs", "cli-output.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	for _, c := range []struct {
		command string
		columns []column
		extra   string
	}{
		{"`pools`", poolColumns, ""},
		{"`show POOL`", allocationColumns, "; with `--slices` a second table " + headerList(sliceColumns, false)},
		{"`pod NS/NAME`", podColumns, ""},
		{"`whois IP`", whoisColumns, ""},
		{"`release`", releaseColumns, ""},
		{"`leaks`", leakColumns, ""},
	} {
		row := "| " + c.command + " | " + headerList(c.columns, false) + c.extra + " | " + headerList(c.columns, true) + " |"
		if !strings.Contains(doc, "\n"+row+"\n") {
			t.Errorf("docs/cli-output.md lacks the row of %s:\n%s", c.command, row)
		}
	}
}

// headerList names the columns a table has by default (wide unset) or -o wide adds, as printed.
func headerList(cols []column, wide bool) string {
	var names []string
	for _, c := range cols {
		if c.wide == wide {
			names = append(names, strings.ToUpper(c.header))
		}
	}
	return strings.Join(names, ", ")
}

// TestOutputDocFields: every field of every document netpoolctl prints has a row in
// docs/cli-output.md (a field table's first cell names it).
func TestOutputDocFields(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "docs", "cli-output.md"))
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		first := strings.Split(line, "|")[1]
		for _, f := range strings.Split(first, ",") {
			name := strings.Trim(strings.TrimSpace(f), "`")
			name = strings.TrimSuffix(name, "[]")
			documented[name] = true
		}
	}
	for _, v := range []any{poolView{}, allocationView{}, sliceView{}, whoisView{}, poolDetail{}, coolingView{}, podAllocations{},
		releaseDoc{}, refusedView{}, releaseResult{}, leakReport{}, leak{}, checkReport{}, checkFinding{}, inventory.Owner{}} {
		typ := reflect.TypeOf(v)
		for i := range typ.NumField() {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if f.Anonymous || name == "" || name == "-" {
				continue
			}
			if !documented[name] {
				t.Errorf("docs/cli-output.md documents no field %q (of %s)", name, typ.Name())
			}
		}
	}
}
