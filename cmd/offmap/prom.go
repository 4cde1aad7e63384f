package main

import (
	"github.com/offmap/offmap/internal/promtext"
)

// printPrometheus is stat --prometheus: the metrics of every map in the
// text exposition format, or nothing and the first error.
func printPrometheus(c *cli, paths []string) error {
	var set promtext.Set
	for _, p := range paths {
		m, err := openMap(p, readOnly)
		if err != nil {
			return err
		}
		set.Add(promtext.MapSamples(p, m.Stats())...)
		if err := m.Close(); err != nil {
			return err
		}
	}
	_, err := set.WriteTo(c.stdout)
	return err
}
