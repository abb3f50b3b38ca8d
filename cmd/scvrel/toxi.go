package main

import (
	"context"
	"fmt"
	"strings"
	"sync"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// netFaults puts a TCP proxy of toxiproxy, run inside the harness as a
// library, between each daemon and the PostgreSQL server: the link the
// network faults of the linear check are made on (latency and jitter,
// connections cut, slow closes, a black hole), one daemon's link or all.
type netFaults struct {
	server  *toxiproxy.ApiServer
	proxies []*toxiproxy.Proxy

	mu     sync.Mutex
	toxics map[int][]string // by proxy, the names of its toxics
	seq    int
}

// newNetFaults starts n proxies to upstream (host:port), each on a free
// port of the loopback interface.
func newNetFaults(upstream string, n int) (*netFaults, error) {
	f := &netFaults{
		server: toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop()),
		toxics: map[int][]string{},
	}
	for i := range n {
		p := toxiproxy.NewProxy(f.server, fmt.Sprintf("daemon-%d", i), "127.0.0.1:0", upstream)
		if err := p.Start(); err != nil {
			f.close()
			return nil, fmt.Errorf("toxiproxy: %w", err)
		}
		f.proxies = append(f.proxies, p)
	}
	return f, nil
}

// addr is the address proxy i listens on.
func (f *netFaults) addr(i int) string { return f.proxies[i].Listen }

// add puts a toxic of kind typ with attributes attrs on proxy i's stream
// (upstream: daemon to server; downstream: server to daemon) and returns
// its name.
func (f *netFaults) add(i int, typ, stream, attrs string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	name := fmt.Sprintf("%s-%s-%d", typ, stream, f.seq)
	body := fmt.Sprintf(`{"name": %q, "type": %q, "stream": %q, "toxicity": 1, "attributes": %s}`, name, typ, stream, attrs)
	if _, err := f.proxies[i].Toxics.AddToxicJson(strings.NewReader(body)); err != nil {
		return "", fmt.Errorf("toxiproxy: %s on %s: %w", typ, f.proxies[i].Name, err)
	}
	f.toxics[i] = append(f.toxics[i], name)
	return name, nil
}

// both puts the toxic on both streams of proxy i.
func (f *netFaults) both(i int, typ, attrs string) error {
	for _, stream := range []string{"upstream", "downstream"} {
		if _, err := f.add(i, typ, stream, attrs); err != nil {
			return err
		}
	}
	return nil
}

// heal removes every toxic of every proxy.
func (f *netFaults) heal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, names := range f.toxics {
		for _, name := range names {
			f.proxies[i].Toxics.RemoveToxic(context.Background(), name)
		}
	}
	clear(f.toxics)
}

// close stops the proxies, cutting every connection through them.
func (f *netFaults) close() {
	for _, p := range f.proxies {
		p.Stop()
	}
}
