package calib

import (
	"fmt"
	"image"
	"image/jpeg"
	"image/png"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

type imageCodec struct {
	decode func(io.Reader) (image.Image, error)
	config func(io.Reader) (image.Config, error)
}

// codecFor returns the decoder for an image file name, or false for other files.
func codecFor(name string) (imageCodec, bool) {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".png":
		return imageCodec{png.Decode, png.DecodeConfig}, true
	case ".jpg", ".jpeg":
		return imageCodec{jpeg.Decode, jpeg.DecodeConfig}, true
	}
	return imageCodec{}, false
}

// listImages returns the PNG and JPEG files under dir, recursively, in lexical order.
func listImages(dir string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasPrefix(d.Name(), ".") && p != dir {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if _, ok := codecFor(p); ok && !d.IsDir() {
			files = append(files, p)
		}
		return nil
	})
	return files, err
}

// folderSource decodes image files on demand.
type folderSource struct {
	files []string
	h, w  int // decoded size, when all images must have it (no resize)
	prep  *imgPrep
	pix   []byte
}

func (s *folderSource) read(i int, dst []byte) error {
	name := s.files[i]
	codec, _ := codecFor(name)
	f, err := os.Open(name)
	if err != nil {
		return fmt.Errorf("image %d: %w", i, err)
	}
	img, err := codec.decode(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("corrupt image %s (entry %d): %w", name, i, err)
	}
	b := img.Bounds()
	if b.Dx() == 0 || b.Dy() == 0 {
		return fmt.Errorf("corrupt image %s (entry %d): empty image", name, i)
	}
	if s.prep.resize == 0 && (b.Dy() != s.h || b.Dx() != s.w) {
		return &ShapeError{File: name, Got: []int{b.Dy(), b.Dx()}, Reason: fmt.Sprintf("image %s (entry %d) is %dx%d, the others %dx%d", name, i, b.Dx(), b.Dy(), s.w, s.h), Fix: []Setting{{"Resize", 0}}}
	}
	var cin int
	s.pix, cin = pixels(s.pix, img)
	s.prep.run(dst, s.pix, b.Dy(), b.Dx(), cin)
	return nil
}

func (s *folderSource) close() error { return nil }

func openFolder(dir string, in Input, o *Options) (*set, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("data: %w", err)
	}
	var (
		files   []string
		labels  []int64
		classes []string
		top     []string
	)
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if !e.IsDir() {
			if _, ok := codecFor(p); ok {
				top = append(top, p)
			}
			continue
		}
		fs, err := listImages(p)
		if err != nil {
			return nil, fmt.Errorf("data: %w", err)
		}
		if len(fs) == 0 {
			continue
		}
		for _, f := range fs {
			files = append(files, f)
			labels = append(labels, int64(len(classes)))
		}
		classes = append(classes, e.Name())
	}
	switch {
	case len(top) > 0 && len(classes) > 0:
		return nil, fmt.Errorf("%s mixes images at top level (%s) with class subfolders (%s): put every image in a class folder, or use a folder without subfolders for unlabelled data", dir, filepath.Base(top[0]), classes[0])
	case len(top) > 0:
		files, labels = top, nil
	case len(files) == 0:
		return nil, fmt.Errorf("%s holds no .png or .jpg images", dir)
	}
	if in.Classes > 0 && len(classes) > in.Classes {
		return nil, fmt.Errorf("%s has %d class folders (%s ... %s) but the model has %d classes: the folder for class %d, %s, is out of range", dir, len(classes), classes[0], classes[len(classes)-1], in.Classes, in.Classes, classes[in.Classes])
	}

	// Read every header first: it finds corrupt files and the common size and colour early.
	gray := true
	h0, w0 := 0, 0
	for i, name := range files {
		codec, _ := codecFor(name)
		f, err := os.Open(name)
		if err != nil {
			return nil, fmt.Errorf("data: %w", err)
		}
		cfg, err := codec.config(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("corrupt image %s (entry %d): %w", name, i, err)
		}
		if cfg.Width <= 0 || cfg.Height <= 0 || int64(cfg.Width)*int64(cfg.Height) > 1<<28 {
			return nil, fmt.Errorf("corrupt image %s (entry %d): size %dx%d", name, i, cfg.Width, cfg.Height)
		}
		gray = gray && isGrayModel(cfg.ColorModel)
		if i == 0 {
			h0, w0 = cfg.Height, cfg.Width
		} else if o.Resize == 0 && (cfg.Height != h0 || cfg.Width != w0) {
			return nil, &ShapeError{File: name, Got: []int{cfg.Height, cfg.Width}, Reason: fmt.Sprintf("image %s is %dx%d but %s is %dx%d", name, cfg.Width, cfg.Height, files[0], w0, h0), Fix: []Setting{{"Resize", 0}}}
		}
	}
	prep := newImgPrep(o)
	cin := 3
	if gray {
		cin = 1
	}
	oc := prep.channels(cin)
	// Every image is converted to the folder's channels, whatever its own.
	prep.color = map[int]Color{1: Grayscale, 3: RGB}[oc]
	oh, ow := prep.size(h0, w0)
	src := &folderSource{files: files, h: h0, w: w0, prep: prep}
	size := oc * oh * ow
	p, err := fitImage(dir, imageDims{c: oc, h: oh, w: ow}, in, o, u8)
	if err != nil {
		return nil, err
	}
	var s source = src
	if int64(len(files))*int64(size) <= o.maxMemory() {
		rec, err := cache(src, len(files), size)
		if err != nil {
			return nil, err
		}
		s = rec
	}
	return &set{name: dir, n: len(files), src: s, sbytes: size, dt: u8, labels: labels, plan: p}, nil
}
