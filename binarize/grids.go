package binarize

import (
	"fmt"
	"slices"
	"strings"

	"github.com/qtool/qtool/admmq/network"
	"github.com/qtool/qtool/onnxio"
)

// MixedGrid is the grid name a file of several grids (Options.Grids) records in its
// metadata and Result.Grid holds.
const MixedGrid network.Grid = "mixed"

// withGrids gives the targets named in o.Grids their own grid: the target network.Targets
// makes for that grid (projector, layout and all), so that a weight of a mixed file is
// treated exactly as in a run of its grid alone.
func withGrids(m *onnxio.Model, ts []network.Target, o Options) ([]network.Target, error) {
	if len(o.Grids) == 0 {
		return ts, nil
	}
	at := map[string]int{}
	for i, t := range ts {
		at[t.Name] = i
	}
	byGrid := map[network.Grid][]string{}
	for _, name := range sortedKeys(o.Grids) {
		if _, ok := at[name]; !ok {
			return nil, &OptionError{Field: "Grids", Value: name, Reason: "not a targeted weight of " + m.Name}
		}
		byGrid[o.Grids[name]] = append(byGrid[o.Grids[name]], name)
	}
	out := slices.Clone(ts)
	for _, g := range network.Grids() {
		names := byGrid[g]
		if len(names) == 0 {
			continue
		}
		gts, err := network.Targets(m, g, network.Selection{Only: names})
		if err != nil {
			return nil, err
		}
		for _, t := range gts {
			out[at[t.Name]] = t
		}
	}
	return out, nil
}

// gridName is the grid the run records: Grid, or MixedGrid when the targets' grids
// differ.
func (o Options) gridName() string {
	for _, g := range o.Grids {
		if g != o.Grid {
			return string(MixedGrid)
		}
	}
	return string(o.Grid)
}

func gridList() string {
	var s []string
	for _, g := range network.Grids() {
		s = append(s, string(g))
	}
	return strings.Join(s, ", ")
}

// packedBytes is what a weight of count values with channels output channels takes in a
// packed file on grid g: its codes at the grid's code width, and a float32 scale per
// channel on scaled grids (export's layout, without the shared unpacking constants).
func packedBytes(g network.Grid, count, channels int64) int64 {
	bits := int64(1)
	switch n := len(g.Levels()); {
	case n > 16:
		bits = 8
	case n > 4:
		bits = 4
	case n > 2:
		bits = 2
	}
	b := (count*bits + 7) / 8
	if g.Scaled() {
		b += 4 * max(channels, 1)
	}
	return b
}

// describe is a grid for messages.
func describe(g network.Grid) string {
	if g == "" {
		return "full precision"
	}
	return fmt.Sprint(g)
}
