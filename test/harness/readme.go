package harness

import (
	"bufio"
	"fmt"
	"regexp"
	"strings"
)

// The quick-start tests read the README's own manifests and commands, so that an edit that stops
// working fails a test instead of an operator.

// MarkdownSection returns the body of the "## heading" section of markdown text, up to the next
// "## " heading.
func MarkdownSection(text, heading string) (string, error) {
	h := "\n## " + heading + "\n"
	start := strings.Index(text, h)
	if start < 0 {
		return "", fmt.Errorf("no %q section", "## "+heading)
	}
	section := text[start+len(h):]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	return section, nil
}

// FencedBlock is one ``` block of markdown: its language and its lines.
type FencedBlock struct{ Lang, Body string }

// FencedBlocks returns the ``` blocks of markdown text, with the language of each; a block
// indented under a list item loses that indentation, as a reader copying it would.
func FencedBlocks(text string) []FencedBlock {
	var out []FencedBlock
	var cur *FencedBlock
	var indent string
	var body strings.Builder
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " ")
		switch {
		case cur == nil && strings.HasPrefix(trimmed, "```"):
			cur = &FencedBlock{Lang: strings.TrimPrefix(trimmed, "```")}
			indent = line[:len(line)-len(trimmed)]
			body.Reset()
		case cur != nil && trimmed == "```":
			cur.Body = body.String()
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			body.WriteString(strings.TrimPrefix(line, indent) + "\n")
		}
	}
	return out
}

// ConsoleCommand is one "$ program args..." line of a console block and what is printed under it.
type ConsoleCommand struct {
	Args   []string // after the program's name
	Output string
}

// ConsoleCommands returns the commands of a console block that run program, each with the lines
// printed under it up to the next "$ " line.
func ConsoleCommands(body, program string) []ConsoleCommand {
	var out []ConsoleCommand
	var cur *ConsoleCommand
	for _, line := range strings.Split(strings.TrimRight(body, "\n"), "\n") {
		if rest, ok := strings.CutPrefix(line, "$ "); ok {
			if cur != nil {
				out = append(out, *cur)
				cur = nil
			}
			if f := strings.Fields(rest); len(f) > 0 && f[0] == program {
				cur = &ConsoleCommand{Args: f[1:]}
			}
			continue
		}
		if cur != nil {
			cur.Output += line + "\n"
		}
	}
	if cur != nil {
		out = append(out, *cur)
	}
	return out
}

// age matches a table cell that is an age (5s, 10m, 3h, 2d).
var age = regexp.MustCompile(`^\d+[smhd]$`)

// NormaliseAges reduces each line of a kubectl-style table to its cells, one blank apart, with
// every age replaced by <age>, so that a README's output and a run's compare whatever time has
// passed (an age of another width moves the columns after it).
func NormaliseAges(s string) string {
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		cells := strings.Fields(l)
		for i, c := range cells {
			if age.MatchString(c) {
				cells[i] = "<age>"
			}
		}
		lines = append(lines, strings.Join(cells, " "))
	}
	return strings.Join(lines, "\n")
}
