package train

import "testing"

// TestMicroSize: the fewest pieces of at most micro samples, of equal size.
func TestMicroSize(t *testing.T) {
	for _, c := range []struct{ n, micro, want int }{
		{512, 357, 256}, {464, 357, 232}, {512, 128, 128}, {512, 0, 512}, {100, 200, 100},
		{501, 256, 251}, {7, 1, 1}, {10, 3, 3},
	} {
		got := MicroSize(c.n, c.micro)
		if got != c.want {
			t.Errorf("MicroSize(%d, %d) = %d, want %d", c.n, c.micro, got, c.want)
		}
		if c.micro > 0 && got > c.micro {
			t.Errorf("MicroSize(%d, %d) = %d is over the micro-batch", c.n, c.micro, got)
		}
	}
}
