package render

import (
	"fmt"
	"io"
	"testing"
)

// The outputs' cost, each including the layout or timeline it draws.
func BenchmarkOutputs(b *testing.B) {
	for _, n := range []int{1000, 5000} {
		p := randomProject(1, n, 3, 40)
		for _, o := range []struct {
			name string
			draw func(io.Writer, Project) error
		}{
			{"GraphText", func(w io.Writer, p Project) error { return GraphText(w, p, TextOptions{Width: 100}) }},
			{"GraphSVG", GraphSVG},
			{"GraphDOT", GraphDOT},
			{"TimelineText", func(w io.Writer, p Project) error { return TimelineText(w, p, TextOptions{Width: 100}) }},
			{"TimelineSVG", TimelineSVG},
			{"CriticalPath", func(io.Writer, Project) error { CriticalPath(p); return nil }},
		} {
			b.Run(fmt.Sprintf("%s/%d", o.name, n), func(b *testing.B) {
				for b.Loop() {
					if err := o.draw(io.Discard, p); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
