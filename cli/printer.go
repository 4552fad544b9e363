package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/yaml"
)

// format is an output format of -o.
type format string

const (
	formatTable format = "table"
	formatWide  format = "wide"
	formatJSON  format = "json"
	formatYAML  format = "yaml"
)

// parseFormat checks -o.
func parseFormat(s string) (format, error) {
	switch f := format(s); f {
	case formatTable, formatWide, formatJSON, formatYAML:
		return f, nil
	}
	return "", fmt.Errorf("unknown output format %q: use table, wide, json or yaml", s)
}

// table is what a command prints as table or wide: kubectl's look, upper-case headers, no
// borders, columns padded by spaces. Columns marked wide appear only with -o wide.
type table struct {
	columns []column
	rows    [][]string
}

type column struct {
	header string
	wide   bool
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) write(w io.Writer, wide bool) error {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	line := func(cells []string) {
		var kept []string
		for i, c := range t.columns {
			if c.wide && !wide {
				continue
			}
			cell := ""
			if i < len(cells) {
				cell = cells[i]
			}
			if cell == "" {
				cell = "<none>"
			}
			kept = append(kept, cell)
		}
		fmt.Fprintln(tw, strings.Join(kept, "\t"))
	}
	headers := make([]string, len(t.columns))
	for i, c := range t.columns {
		headers[i] = strings.ToUpper(c.header)
	}
	line(headers)
	for _, r := range t.rows {
		line(r)
	}
	return tw.Flush()
}

// emit prints doc (the command's stable, documented schema) as json or yaml, or t as a table.
func emit(w io.Writer, f format, t *table, doc any) error {
	switch f {
	case formatJSON:
		data, err := json.MarshalIndent(doc, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", data)
		return err
	case formatYAML:
		data, err := yaml.Marshal(doc)
		if err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	}
	return t.write(w, f == formatWide)
}

// age prints how long ago t was, as kubectl does ("5m", "3d2h"); "<unknown>" for a zero time.
func age(now, t time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t))
}
