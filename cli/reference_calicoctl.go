package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// calicoctlRow is one row of the table docs/cli.md gives calicoctl users: what they type there,
// and the netpoolctl command lines that do the same. TestCalicoctlTable checks that every command
// and flag named exists, and takes the arguments given.
type calicoctlRow struct {
	calicoctl  string
	netpoolctl []commandLine
	note       string
}

// commandLine is a netpoolctl command line: the command's path below the root, its arguments and
// its flags (each a flag and, if it takes one, its value).
type commandLine struct {
	path  string
	args  []string
	flags []string
}

func (l commandLine) String() string {
	return strings.Join(slices.Concat([]string{"netpoolctl", l.path}, l.args, l.flags), " ")
}

// calicoctlRows are calicoctl ipam's everyday commands, in the order an operator meets them.
var calicoctlRows = []calicoctlRow{
	{"calicoctl ipam show", []commandLine{{path: "pools"}},
		"capacity, used, free, utilisation and READY per pool; `-o wide` adds the window, gateway and exclusions"},
	{"calicoctl ipam show --show-blocks", []commandLine{{path: "show", args: []string{"POOL"}, flags: []string{"--slices"}}},
		"a pool's addresses, and its node slices (netpool's blocks) with their node and use"},
	{"calicoctl ipam show --ip=ADDR", []commandLine{{path: "whois", args: []string{"ADDR"}}},
		"who holds the address (pod, container, persistent owner), or why it is free or cooling"},
	{"calicoctl get workloadendpoints -n NS", []commandLine{{path: "pod", args: []string{"NS/NAME"}}},
		"a pod's addresses across every pool, selected by the API server on spec.podRef"},
	{"calicoctl ipam check", []commandLine{{path: "check"}, {path: "leaks"}},
		"check finds inconsistencies (an address held twice, outside its pool, of no pool); leaks lists what the controller's GC would release, and why; both exit 1 on a finding"},
	{"calicoctl ipam check -o report.json", []commandLine{{path: "leaks", flags: []string{"-o json"}}},
		"the leak report (schema in docs/cli-output.md), to read or to feed back to release"},
	{"calicoctl ipam release --from-report=report.json", []commandLine{{path: "release", flags: []string{"--from-report leaks.json"}}},
		"each address judged again now, by the GC's own conditional delete: one that became live since the report is refused and named"},
	{"calicoctl ipam release --ip=ADDR", []commandLine{{path: "release", args: []string{"ADDR"}}, {path: "release", flags: []string{"--pod NS/NAME"}}},
		"refused while the owner is alive, naming the rule that refused; `--force` releases anyway"},
}

// writeCalicoctlTable writes the table of calicoctlRows.
func writeCalicoctlTable(w io.Writer) error {
	var b strings.Builder
	b.WriteString("\n## netpoolctl for calicoctl users\n\n")
	b.WriteString("netpoolctl takes kubectl's cluster and output flags (`-n`, `--context`, `-o json|yaml|wide|name|jsonpath=...`),\n")
	b.WriteString("and `--db FILE` reads a host's embedded store with the same commands and formats.\n\n")
	b.WriteString("| calicoctl | netpoolctl | what it shows or does |\n| --- | --- | --- |\n")
	for _, r := range calicoctlRows {
		var lines []string
		for _, l := range r.netpoolctl {
			lines = append(lines, "`"+l.String()+"`")
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", r.calicoctl, strings.Join(lines, ", "), r.note)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
