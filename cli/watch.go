package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/netpool/netpool/cli/inventory"
)

// watchScope narrows what a watch in a cluster holds: the reservations of one pool (show POOL,
// selected by the API server on spec.pool), and whether the pool's slices are needed too.
type watchScope struct {
	pool   string
	slices bool
}

// runWatch prints render's output, then again whenever it changes, until the command's context
// ends (an interrupt, which is not an error). In a cluster the inputs come from informers: watch
// events change them, so nothing is polled and an unchanged cluster prints nothing more. With --db
// the file is read every interval (a file sends no events), holding its lock only while it reads.
func runWatch(cmd *cobra.Command, opts *options, pr *printer, interval time.Duration, scope watchScope,
	render func(context.Context, inventory.Source) (output, error)) error {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	if interval <= 0 {
		return fmt.Errorf("--watch-interval must be positive, not %s", interval)
	}
	embedded, err := opts.embedded()
	if err != nil {
		return err
	}
	wp := &watchPrinter{w: cmd.OutOrStdout(), pr: pr}
	if embedded {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			src, err := opts.source()
			if err != nil {
				return err
			}
			out, err := render(ctx, src)
			src.Close()
			if ctx.Err() != nil {
				return nil
			}
			if err != nil {
				return err
			}
			if err := wp.show(out); err != nil {
				return err
			}
			select {
			case <-ctx.Done():
				return nil
			case <-tick.C:
			}
		}
	}
	c, err := opts.watchClient()
	if err != nil {
		return err
	}
	timeout, err := opts.timeout()
	if err != nil {
		return err
	}
	src, changed, err := startInformers(ctx, c, scope, timeout)
	if err != nil {
		return err
	}
	for {
		out, err := render(ctx, src)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		if err := wp.show(out); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		}
		// A burst of events (a pod's ADD writes a reservation, then the controller the pool's
		// status) is printed once.
		settle := time.NewTimer(watchSettle)
		select {
		case <-ctx.Done():
			settle.Stop()
			return nil
		case <-settle.C:
		}
		select {
		case <-changed:
		default:
		}
	}
}

// watchSettle is how long a watch waits after an event for the ones that follow it.
const watchSettle = 100 * time.Millisecond

// watchPrinter prints a watch's outputs: for a table, the header once and then only the rows that
// changed in anything but AGE (a row that went is printed once more with AGE <deleted>), in the
// column widths of the first listing; in any other format the whole output whenever it differs.
type watchPrinter struct {
	w  io.Writer
	pr *printer
	// widths are the table's column widths, from the first listing; nil before it.
	widths []int
	// rows are the rows printed last, by key, without AGE; order their keys in print order.
	rows  map[string][]string
	order []string
	last  []byte
}

func (wp *watchPrinter) show(out output) error {
	if !wp.pr.tabular() || out.table == nil {
		var b bytes.Buffer
		if err := wp.pr.print(&b, out); err != nil {
			return err
		}
		if bytes.Equal(b.Bytes(), wp.last) {
			return nil
		}
		wp.last = b.Bytes()
		_, err := wp.w.Write(b.Bytes())
		return err
	}
	t := out.table
	if wp.pr.sortBy != "" {
		if err := sortItems(out, wp.pr.sortBy); err != nil {
			return err
		}
	}
	wide := wp.pr.kind == printWide
	ageAt := -1
	for i, h := range t.cells(t.headers(), wide) {
		if h == "AGE" {
			ageAt = i
		}
	}
	rows := make([][]string, len(t.rows))
	keys := make([]string, len(t.rows))
	for i, r := range t.rows {
		rows[i] = t.cells(r, wide)
		keys[i] = rows[i][0]
		if i < len(t.names) {
			keys[i] = t.names[i]
		}
	}
	var b strings.Builder
	if wp.widths == nil {
		header := t.cells(t.headers(), wide)
		wp.widths = make([]int, len(header))
		for _, r := range append([][]string{header}, rows...) {
			for i, c := range r {
				wp.widths[i] = max(wp.widths[i], len(c))
			}
		}
		wp.rows = map[string][]string{}
		if !wp.pr.noHeaders {
			wp.line(&b, header)
		}
	}
	withoutAge := func(r []string) []string {
		if ageAt < 0 {
			return r
		}
		return slices.Delete(slices.Clone(r), ageAt, ageAt+1)
	}
	seen := map[string]bool{}
	for i, r := range rows {
		seen[keys[i]] = true
		cmp := withoutAge(r)
		if prev, ok := wp.rows[keys[i]]; ok && slices.Equal(withoutAge(prev), cmp) {
			continue
		}
		if _, ok := wp.rows[keys[i]]; !ok {
			wp.order = append(wp.order, keys[i])
		}
		wp.rows[keys[i]] = r
		wp.line(&b, r)
	}
	kept := wp.order[:0]
	for _, k := range wp.order {
		if seen[k] {
			kept = append(kept, k)
			continue
		}
		gone := slices.Clone(wp.rows[k])
		if ageAt >= 0 {
			gone[ageAt] = "<deleted>"
		}
		wp.line(&b, gone)
		delete(wp.rows, k)
	}
	wp.order = kept
	_, err := io.WriteString(wp.w, b.String())
	return err
}

// line writes cells padded to the watch's widths, three spaces apart, as the tables are.
func (wp *watchPrinter) line(b *strings.Builder, cells []string) {
	for i, c := range cells {
		if i == len(cells)-1 {
			b.WriteString(c)
			break
		}
		w := len(c)
		if i < len(wp.widths) {
			w = max(w, wp.widths[i])
		}
		b.WriteString(c)
		b.WriteString(strings.Repeat(" ", w-len(c)+3))
	}
	b.WriteString("\n")
}
