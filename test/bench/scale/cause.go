package main

import (
	"strings"

	"github.com/netpool/netpool/test/apicount"
)

// Each agent's watch events are filed by the object they carry (apicount.ByNode), so that "caused
// by other nodes" is counted event by event rather than assumed from the kind: an object of the
// node's own (a reservation or slice whose spec.node is the node, its Node), an object of another
// node (the target: none reach an idle node), or an object of no node (an IPPool, whose status the
// controller writes from every node's work; a Namespace).
const (
	causeOwn       = "own"
	causeOtherNode = "other node"
	causeNoNode    = "no node"
)

// attribute returns c with its Causes and CauseBytes filed again under "resource cause" with
// cause one of the three above, as seen by node's agent; the counts of many agents can then be
// summed.
func attribute(c apicount.Counts, node string) apicount.Counts {
	causes, bytes := map[string]int{}, map[string]int64{}
	for key, n := range c.Causes {
		res, why := causeOf(key, node)
		causes[res+" "+why] += n
		bytes[res+" "+why] += c.CauseBytes[key]
	}
	c.Causes, c.CauseBytes = causes, bytes
	return c
}

// causeOf files one apicount.ByNode key ("resource TYPE node", or "resource undecoded").
func causeOf(key, node string) (resource, cause string) {
	res, rest, _ := strings.Cut(key, " ")
	if rest == apicount.Undecoded {
		// Protobuf, which the agent reads for built-in kinds: its Node, which the API server
		// selects by name, and Namespaces, which belong to no node. Anything else is counted
		// against the target rather than for it.
		switch res {
		case "nodes":
			return res, causeOwn
		case "namespaces":
			return res, causeNoNode
		}
		return res, causeOtherNode
	}
	_, of, _ := strings.Cut(rest, " ")
	switch of {
	case node:
		return res, causeOwn
	case "-":
		return res, causeNoNode
	}
	return res, causeOtherNode
}

// eventsOf sums c's attributed watch events and their bytes filed under one of causes.
func eventsOf(c apicount.Counts, causes ...string) (int, int64) {
	n, b := 0, int64(0)
	for key, v := range c.Causes {
		_, why, _ := strings.Cut(key, " ")
		for _, want := range causes {
			if why == want {
				n += v
				b += c.CauseBytes[key]
			}
		}
	}
	return n, b
}
