package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/yaml"
)

// printFlags are kubectl's output flags: -o (with every format kubectl get knows), --no-headers,
// --sort-by and --template. Every command prints through printer, one path, whatever the source.
type printFlags struct {
	output    string
	noHeaders bool
	sortBy    string
	template  string
}

// outputFormats are the values -o takes, for help and completion; a format ending in = takes its
// argument after it.
var outputFormats = []string{
	"wide", "json", "yaml", "name",
	"jsonpath=", "jsonpath-file=", "jsonpath-as-json=", "go-template=", "go-template-file=",
	"custom-columns=", "custom-columns-file=",
}

func (p *printFlags) addFlags(fs *pflag.FlagSet) {
	fs.StringVarP(&p.output, "output", "o", "", "output format: one of ("+strings.Join(outputFormats, ", ")+"); default a table")
	fs.BoolVar(&p.noHeaders, "no-headers", false, "when printing a table (default or wide) or custom columns, leave out the headers")
	fs.StringVar(&p.sortBy, "sort-by", "", "sort the listed items by this JSONPath expression over each item of the document (e.g. '{.used}' or .address)")
	fs.StringVar(&p.template, "template", "", "the template of -o go-template or -o jsonpath, when not given after the =")
}

// printKind is what a printer does.
type printKind int

const (
	printTable printKind = iota
	printWide
	printJSON
	printYAML
	printName
	printTemplate // a cli-runtime JSONPath or Go template printer over the document
	printColumns  // custom columns over each item
)

// printer prints a command's document, or its table.
type printer struct {
	kind      printKind
	noHeaders bool
	sortBy    string
	template  printers.ResourcePrinter
	columns   []customColumn
}

// printer checks the flags and returns the printer they describe.
func (p *printFlags) printer() (*printer, error) {
	pr := &printer{noHeaders: p.noHeaders, sortBy: p.sortBy}
	name, arg, hasArg := strings.Cut(p.output, "=")
	if !hasArg && p.template != "" {
		arg = p.template
	}
	if hasArg && arg == "" {
		return nil, fmt.Errorf("-o %s= needs its argument after the =", name)
	}
	switch name {
	case "", "table":
		pr.kind = printTable
	case "wide":
		pr.kind = printWide
	case "json":
		pr.kind = printJSON
	case "yaml":
		pr.kind = printYAML
	case "name":
		pr.kind = printName
	case "jsonpath", "jsonpath-file", "jsonpath-as-json", "go-template", "go-template-file":
		if arg == "" {
			return nil, fmt.Errorf("-o %s needs a template: -o %s=TEMPLATE or --template", name, name)
		}
		text, err := templateText(name, arg)
		if err != nil {
			return nil, err
		}
		pr.kind = printTemplate
		if strings.HasPrefix(name, "jsonpath") {
			jp, err := printers.NewJSONPathPrinter(text)
			if err != nil {
				return nil, fmt.Errorf("-o %s: %w", name, err)
			}
			jp.AllowMissingKeys(true)
			if name == "jsonpath-as-json" {
				jp.EnableJSONOutput(true)
			}
			pr.template = jp
		} else {
			gt, err := printers.NewGoTemplatePrinter([]byte(text))
			if err != nil {
				return nil, fmt.Errorf("-o %s: %w", name, err)
			}
			pr.template = gt
		}
	case "custom-columns", "custom-columns-file":
		text, err := templateText(name, arg)
		if err != nil {
			return nil, err
		}
		if pr.columns, err = parseCustomColumns(text, name == "custom-columns-file"); err != nil {
			return nil, err
		}
		pr.kind = printColumns
	default:
		return nil, fmt.Errorf("unknown output format %q: use one of %s", p.output, strings.Join(outputFormats, ", "))
	}
	if pr.sortBy != "" {
		if _, err := newJSONPath(pr.sortBy); err != nil {
			return nil, fmt.Errorf("--sort-by %q: %w", pr.sortBy, err)
		}
	}
	return pr, nil
}

// templateText is the template of -o NAME=ARG: ARG, or the file ARG names for the -file formats.
func templateText(name, arg string) (string, error) {
	if !strings.HasSuffix(name, "-file") {
		return arg, nil
	}
	data, err := os.ReadFile(arg)
	if err != nil {
		return "", fmt.Errorf("-o %s: %w", name, err)
	}
	return string(data), nil
}

// tabular reports whether p prints tables (the default or wide), where a command may add text
// around them that a document has no place for.
func (p *printer) tabular() bool { return p.kind == printTable || p.kind == printWide }

// output is what a command prints: its document (the stable schema of docs/cli-output.md), the
// name of the document's field that lists its items (for --sort-by, -o name and custom columns;
// "" for a document that is one item), and the table of those items, a row per item in order.
type output struct {
	doc   any
	items string
	table *table
}

// print prints out as p says.
func (p *printer) print(w io.Writer, out output) error {
	if p.sortBy != "" {
		if out.items == "" {
			return fmt.Errorf("--sort-by: this command prints one document, not a list")
		}
		if err := sortItems(out, p.sortBy); err != nil {
			return err
		}
	}
	switch p.kind {
	case printJSON:
		data, err := json.MarshalIndent(out.doc, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", data)
		return err
	case printYAML:
		data, err := yaml.Marshal(out.doc)
		if err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	case printName:
		if out.table == nil || (out.items == "" && len(out.table.names) == 0) {
			return fmt.Errorf("-o name: this command's output has no names")
		}
		for _, n := range out.table.names {
			if _, err := fmt.Fprintln(w, n); err != nil {
				return err
			}
		}
		return nil
	case printTemplate:
		obj, err := unstructuredOf(out.doc)
		if err != nil {
			return err
		}
		return p.template.PrintObj(obj, w)
	case printColumns:
		return p.printColumns(w, out)
	}
	if out.table == nil {
		return nil
	}
	return out.table.write(w, p.kind == printWide, p.noHeaders)
}

// unstructuredOf is doc as the generic object the template printers read: its json.
func unstructuredOf(doc any) (*unstructured.Unstructured, error) {
	content, err := contentOf(doc)
	if err != nil {
		return nil, err
	}
	m, ok := content.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("the document is not an object")
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// contentOf is v through its json encoding: maps, slices, strings, float64s and bools.
func contentOf(v any) (any, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var content any
	return content, json.Unmarshal(data, &content)
}

// itemsValue is the slice field of doc whose json name is field (through embedded structs).
func itemsValue(doc any, field string) (reflect.Value, bool) {
	v := reflect.ValueOf(doc)
	for v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return reflect.Value{}, false
	}
	for i := 0; i < v.NumField(); i++ {
		f := v.Type().Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == field && v.Field(i).Kind() == reflect.Slice {
			return v.Field(i), true
		}
	}
	return reflect.Value{}, false
}

// table is what a command prints as a table: kubectl's look, upper-case headers, no borders,
// columns padded by spaces. Columns marked wide appear only with -o wide. Each row may carry the
// name -o name prints for it.
type table struct {
	columns []column
	rows    [][]string
	names   []string
}

type column struct {
	header string
	wide   bool
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

// addNamed adds a row with the name -o name prints for it (kind/name, as kubectl prints).
func (t *table) addNamed(name string, cells ...string) {
	t.rows = append(t.rows, cells)
	t.names = append(t.names, name)
}

// cells are row's cells of the columns shown, "<none>" for an empty one.
func (t *table) cells(row []string, wide bool) []string {
	var kept []string
	for i, c := range t.columns {
		if c.wide && !wide {
			continue
		}
		cell := ""
		if i < len(row) {
			cell = row[i]
		}
		if cell == "" {
			cell = "<none>"
		}
		kept = append(kept, cell)
	}
	return kept
}

func (t *table) headers() []string {
	h := make([]string, len(t.columns))
	for i, c := range t.columns {
		h[i] = strings.ToUpper(c.header)
	}
	return h
}

func (t *table) write(w io.Writer, wide, noHeaders bool) error {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	if !noHeaders {
		fmt.Fprintln(tw, strings.Join(t.cells(t.headers(), wide), "\t"))
	}
	for _, r := range t.rows {
		fmt.Fprintln(tw, strings.Join(t.cells(r, wide), "\t"))
	}
	return tw.Flush()
}

// age prints how long ago t was, as kubectl does ("5m", "3d2h"); "<unknown>" for a zero time.
func age(now, t time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t))
}
