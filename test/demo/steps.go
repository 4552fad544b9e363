package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/netpool/netpool/test/harness"
)

// step prints one demo step.
func step(format string, args ...any) {
	fmt.Printf("==> "+format+"\n", args...)
}

// detail prints a line under a step.
func detail(format string, args ...any) {
	fmt.Printf("    "+format+"\n", args...)
}

// details is a writer whose every line is a detail: the harness's build progress.
type details struct{}

func (details) Write(p []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		detail("%s", line)
	}
	return len(p), nil
}

// cleanups undoes what the demo made, in reverse order, whatever happened in between.
type cleanups struct {
	names []string
	funcs []func() error
}

func (c *cleanups) add(name string, f func() error) {
	c.names = append(c.names, name)
	c.funcs = append(c.funcs, f)
}

func (c *cleanups) run() error {
	step("Cleaning up")
	var errs []error
	for i := len(c.funcs) - 1; i >= 0; i-- {
		if err := c.funcs[i](); err != nil {
			fmt.Fprintf(os.Stderr, "    %s: %v\n", c.names[i], err)
			errs = append(errs, fmt.Errorf("%s: %w", c.names[i], err))
		}
	}
	return errors.Join(errs...)
}

// command prints a command the demo runs, as an operator would type it.
func command(format string, args ...any) {
	fmt.Printf("    $ "+format+"\n", args...)
}

// output prints a command's output, indented under it.
func output(s string) {
	for _, line := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		fmt.Println("    " + line)
	}
}

// newNetNS creates a namespace and registers its removal.
func newNetNS(c *cleanups, name string) (ns.NetNS, error) {
	n, err := harness.NewNetNS()
	if err != nil {
		return nil, fmt.Errorf("namespace %s: %w", name, err)
	}
	detail("namespace %-4s %s", name, n.Path())
	c.add("removing namespace "+name, func() error { return harness.CloseNetNS(n) })
	return n, nil
}
