// Package calib reads calibration and evaluation data sets from the formats users already
// have and maps them onto an ONNX model's input.
//
// Open picks a reader from the path's extension and content:
//
//   - .npy arrays, with labels from a second .npy given by Options.Labels;
//   - .npz archives, with the arrays named by Options.XKey and Options.YKey (x and y);
//   - MNIST-format idx files, gzipped or not, with labels from the labels-idx1 file next to the
//     images-idx3 file, or from Options.Labels;
//   - CIFAR-10 binary batches: one .bin file, a glob pattern, or a folder holding data_batch_*.bin;
//   - a folder of PNG and JPEG images, with one subfolder per class (the ImageFolder convention,
//     classes numbered in the sorted order of the folder names) or with all images at top level
//     and no labels;
//   - .csv (optionally .csv.gz) with numeric feature columns and an optional label column.
//
// The caller describes the model's first input with an Input. Open checks the data against it
// (rank, channels, spatial size) and converts every sample to float32 in the model's layout:
// a [N,28,28] array feeds a [batch,784] or a [batch,1,28,28] input, channels-last arrays are
// transposed when Options.Layout says the file is NHWC, and decoded images are laid out as
// NCHW or NHWC as the input shape shows. When the data cannot fit, the error is a *ShapeError
// that says what differs and holds in Fix the Options settings that make the data fit. Errors
// that an Options field causes or cures are *OptionError (naming the field), labels outside
// the model's classes *LabelError. Messages name Options fields, never command-line flags, so
// that a command line can map them onto its own flags.
//
// uint8 data (idx, CIFAR, PNG/JPEG, uint8 arrays) is divided by 255 unless Options.NoScale is
// set; Options.Mean and Options.Std then normalise each channel.
//
// A data set without labels reports HasLabels() == false. Callers then fall back to
// distillation from the full-precision model for training, and report agreement with the
// full-precision model instead of accuracy for evaluation.
//
// Data sets whose decoded size exceeds Options.MaxMemory are not loaded: idx, .npy, stored
// .npz members and CIFAR files are read record by record from disk, gzipped idx files and
// compressed .npz members are first decompressed to a temporary file, and image folders decode
// each image when it is read. CSV files are always loaded.
//
// A Dataset and its views are not safe for concurrent use.
package calib
