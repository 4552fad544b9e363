// Package ipamplugin implements the CNI verbs of the netpool IPAM plugin: ADD, DEL, CHECK, GC,
// STATUS and VERSION, over the allocator and the store the config selects.
//
// Nothing here writes to stdout but the result: skel prints results and errors, and logs go to
// log_file or stderr.
package ipamplugin
