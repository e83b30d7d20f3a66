package calib_test

import (
	"fmt"
	"log"

	"github.com/qtool/qtool/calib"
)

func Example() {
	// The model's first input is [batch,6]; it has 4 classes. The file holds [4,2,3] float32.
	d, err := calib.Open("testdata/numpy/x_be.npy", calib.Options{
		Input:  calib.Input{Name: "x", Shape: []int64{-1, 6}, Classes: 4},
		Labels: "testdata/numpy/y_i4.npy",
	})
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	b, err := calib.NewBatches(d, calib.BatchOptions{Size: 3, Shuffle: true, Seed: 1})
	if err != nil {
		log.Fatal(err)
	}
	for b.Next() {
		fmt.Println(b.Shape(), b.Indices(), b.Y())
	}
	if err := b.Err(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// [3 6] [1 2 0] [0 2 3]
	// [1 6] [3] [1]
}
