package main

import (
	"fmt"

	"github.com/offmap/offmap/internal/promtext"
)

// printPrometheus is stats --prometheus: the metrics of every queue in
// the text exposition format, or nothing and the first error.
func printPrometheus(c *cli, dirs []string) error {
	var set promtext.Set
	for _, d := range dirs {
		q, err := openQueue(d)
		if err != nil {
			return err
		}
		st, err := q.Stats()
		q.Close()
		if err != nil {
			return err
		}
		samples, err := promtext.QueueSamples(d, st)
		if err != nil {
			return fmt.Errorf("%s: %w; 'offqueue verify' lists the problems", d, err)
		}
		set.Add(samples...)
	}
	_, err := set.WriteTo(c.stdout)
	return err
}
