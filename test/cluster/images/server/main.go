// Command server is the test cluster's TEST_IMAGE: an HTTP server on TCP 8080 that answers with the
// pod's addresses, per interface, and the address the request came from; GET /dial?to=host:port
// makes the pod itself ask another server, so a test sees traffic between two pods on any network.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"
)

// Answer is what the server says.
type Answer struct {
	Hostname string              `json:"hostname"`
	Addrs    map[string][]string `json:"addrs"`
	// Remote is the request's source address as this pod saw it.
	Remote string `json:"remote"`
}

func answer(r *http.Request) Answer {
	a := Answer{Addrs: map[string][]string{}, Remote: r.RemoteAddr}
	a.Hostname, _ = os.Hostname()
	ifs, _ := net.Interfaces()
	for _, i := range ifs {
		addrs, _ := i.Addrs()
		for _, ad := range addrs {
			a.Addrs[i.Name] = append(a.Addrs[i.Name], ad.String())
		}
	}
	return a
}

func main() {
	client := &http.Client{Timeout: 10 * time.Second}
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(answer(r))
	})
	http.HandleFunc("/dial", func(w http.ResponseWriter, r *http.Request) {
		resp, err := client.Get("http://" + r.URL.Query().Get("to") + "/")
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.Copy(w, resp.Body)
	})
	srv := &http.Server{Addr: ":8080", ReadHeaderTimeout: 10 * time.Second}
	if err := srv.ListenAndServe(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
