package metrics_test

import (
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/offmap/offmap/metrics"
	"github.com/offmap/offmap/offmap"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Register the collector with a registry and serve it on /metrics. With
// ContinueOnError a file that cannot be read fails its own metrics only:
// the handler serves the others and logs the error.
func Example() {
	dir, _ := os.MkdirTemp("", "offmap-metrics")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "clients.map")
	m, err := offmap.Open(path, offmap.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	m.Put([]byte("alice"), []byte("1"))

	c := metrics.NewCollector()
	c.AddMap(path) // or c.AddOpenMap(m); c.AddQueue(dir) for a queue
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))

	ln, err := net.Listen("tcp", "127.0.0.1:0") // a service listens on its own port, e.g. :9464
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	defer srv.Close()

	resp, err := http.Get("http://" + ln.Addr().String() + "/metrics")
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "offmap_map_entries{") {
			fmt.Println(strings.Replace(line, path, "clients.map", 1))
		}
	}
	// Output:
	// offmap_map_entries{path="clients.map"} 1
}
