package cli

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/netip"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"k8s.io/client-go/util/jsonpath"
)

// newJSONPath parses a JSONPath expression as kubectl's --sort-by and custom-columns take it:
// "{.a.b}", or relaxed, ".a.b" and "a.b".
func newJSONPath(expr string) (*jsonpath.JSONPath, error) {
	expr = strings.TrimSpace(expr)
	if expr == "" {
		return nil, fmt.Errorf("an empty JSONPath expression")
	}
	if !strings.HasPrefix(expr, "{") {
		if !strings.HasPrefix(expr, ".") {
			expr = "." + expr
		}
		expr = "{" + expr + "}"
	}
	jp := jsonpath.New("column").AllowMissingKeys(true)
	if err := jp.Parse(expr); err != nil {
		return nil, err
	}
	return jp, nil
}

// evalPath is what jp prints for item: its results joined by commas, "" when it finds nothing.
func evalPath(jp *jsonpath.JSONPath, item any) (string, error) {
	results, err := jp.FindResults(item)
	if err != nil {
		return "", err
	}
	var vals []string
	for _, rs := range results {
		for _, r := range rs {
			var b bytes.Buffer
			if err := jp.PrintResults(&b, []reflect.Value{r}); err != nil {
				return "", err
			}
			vals = append(vals, b.String())
		}
	}
	return strings.Join(vals, ","), nil
}

// sortItems sorts the items of out.doc, and the rows of out.table with them, by the value of expr
// in each item: addresses as addresses, numbers as numbers, anything else as text; an item where
// expr finds nothing sorts first. The sort is stable.
func sortItems(out output, expr string) error {
	items, ok := itemsValue(out.doc, out.items)
	if !ok {
		return fmt.Errorf("--sort-by: the document has no list %q", out.items)
	}
	jp, err := newJSONPath(expr)
	if err != nil {
		return fmt.Errorf("--sort-by %q: %w", expr, err)
	}
	n := items.Len()
	keys := make([]string, n)
	for i := range n {
		content, err := contentOf(items.Index(i).Interface())
		if err != nil {
			return err
		}
		if keys[i], err = evalPath(jp, content); err != nil {
			return fmt.Errorf("--sort-by %q: %w", expr, err)
		}
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return compareKeys(keys[a], keys[b]) })
	sorted := reflect.MakeSlice(items.Type(), n, n)
	for to, from := range order {
		sorted.Index(to).Set(items.Index(from))
	}
	items.Set(sorted)
	if t := out.table; t != nil && len(t.rows) == n {
		rows := make([][]string, n)
		for to, from := range order {
			rows[to] = t.rows[from]
		}
		t.rows = rows
		if len(t.names) == n {
			names := make([]string, n)
			for to, from := range order {
				names[to] = t.names[from]
			}
			t.names = names
		}
	}
	return nil
}

func compareKeys(a, b string) int {
	switch {
	case a == b:
		return 0
	case a == "":
		return -1
	case b == "":
		return 1
	}
	if x, err := netip.ParseAddr(a); err == nil {
		if y, err := netip.ParseAddr(b); err == nil {
			return x.Compare(y)
		}
	}
	if x, err := strconv.ParseFloat(a, 64); err == nil {
		if y, err := strconv.ParseFloat(b, 64); err == nil {
			switch {
			case x < y:
				return -1
			case x > y:
				return 1
			}
			return 0
		}
	}
	return strings.Compare(a, b)
}

// customColumn is one column of -o custom-columns.
type customColumn struct {
	header string
	path   *jsonpath.JSONPath
}

// parseCustomColumns parses kubectl's custom-columns spec, HEADER:JSONPATH[,HEADER:JSONPATH...];
// from a file, a line of headers and a line of JSONPath expressions, separated by spaces.
func parseCustomColumns(spec string, file bool) ([]customColumn, error) {
	var headers, paths []string
	if file {
		sc := bufio.NewScanner(strings.NewReader(spec))
		var lines []string
		for sc.Scan() {
			if l := strings.TrimSpace(sc.Text()); l != "" {
				lines = append(lines, l)
			}
		}
		if len(lines) != 2 {
			return nil, fmt.Errorf("-o custom-columns-file: want a line of headers and a line of JSONPath expressions, not %d lines", len(lines))
		}
		headers, paths = strings.Fields(lines[0]), strings.Fields(lines[1])
		if len(headers) != len(paths) {
			return nil, fmt.Errorf("-o custom-columns-file: %d headers but %d expressions", len(headers), len(paths))
		}
	} else {
		for _, part := range strings.Split(spec, ",") {
			h, p, ok := strings.Cut(part, ":")
			if !ok || strings.TrimSpace(h) == "" || strings.TrimSpace(p) == "" {
				return nil, fmt.Errorf("-o custom-columns: %q is not HEADER:JSONPATH", part)
			}
			headers, paths = append(headers, h), append(paths, p)
		}
	}
	cols := make([]customColumn, len(headers))
	for i := range headers {
		jp, err := newJSONPath(paths[i])
		if err != nil {
			return nil, fmt.Errorf("-o custom-columns: column %s: %w", headers[i], err)
		}
		cols[i] = customColumn{header: headers[i], path: jp}
	}
	return cols, nil
}

// printColumns prints a row per item of out's list (one row for a document without one).
func (p *printer) printColumns(w io.Writer, out output) error {
	var items []any
	if out.items == "" {
		content, err := contentOf(out.doc)
		if err != nil {
			return err
		}
		items = []any{content}
	} else {
		v, ok := itemsValue(out.doc, out.items)
		if !ok {
			return fmt.Errorf("-o custom-columns: the document has no list %q", out.items)
		}
		for i := range v.Len() {
			content, err := contentOf(v.Index(i).Interface())
			if err != nil {
				return err
			}
			items = append(items, content)
		}
	}
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	if !p.noHeaders {
		var hs []string
		for _, c := range p.columns {
			hs = append(hs, c.header)
		}
		fmt.Fprintln(tw, strings.Join(hs, "\t"))
	}
	for _, item := range items {
		var cells []string
		for _, c := range p.columns {
			s, err := evalPath(c.path, item)
			if err != nil {
				return fmt.Errorf("-o custom-columns: column %s: %w", c.header, err)
			}
			if s == "" {
				s = "<none>"
			}
			cells = append(cells, s)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}
