// Package corpus holds qtool's real-model corpus: small but real graphs exported by PyTorch
// 1.13 (torchvision classifiers, a TransformerEncoder, a ViT-style block, recurrent, CTC,
// U-Net, control-flow, sigmoid, fixed-batch, two-input and channels-last models), generated
// by make.py in this folder, and the tests that check qtool's engine against onnxruntime on
// each of them, binarize every one end to end, and check the binarized file's fidelity.
//
// Nothing generated is committed (ResNet-18 alone is 45 MB): Ensure runs make.py into
// .cache/corpus/ under the module root when that folder is missing or was written by another
// version of make.py. The manifest there lists every model, its inputs and outputs, its kind
// and the known engine defects that still affect it (see make.py).
package corpus

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Python is the interpreter make.py needs: Debian's, which has python3-torch and
// python3-torchvision; a pyenv or virtualenv python3 on PATH would not.
const Python = "/usr/bin/python3"

// InstallHint says how to install what make.py needs.
const InstallHint = "apt-get install -y python3-torch python3-torchvision python3-onnx dataset-fashion-mnist"

// CacheDir is the corpus folder relative to the module root.
const CacheDir = ".cache/corpus"

// Value is a graph input or output: its name and declared shape (-1 for a free dimension).
type Value struct {
	Name  string `json:"name"`
	Shape []int  `json:"shape"`
}

// Model is one manifest entry.
type Model struct {
	Name         string  `json:"name"`
	File         string  `json:"file"`
	Data         string  `json:"data"`
	TorchOutputs string  `json:"torch_outputs"`
	Opset        int     `json:"opset"`
	Params       int     `json:"params"`
	Inputs       []Value `json:"inputs"`
	Outputs      []Value `json:"outputs"`
	// Kind is classifier ([N, C] logits), sequence (class scores per position along
	// ClassAxis), features, or sigmoid ([N, 1] probability).
	Kind      string `json:"kind"`
	ClassAxis *int   `json:"class_axis,omitempty"`
	// Ops are the graph's op types, subgraphs included.
	Ops []string `json:"ops"`
	// Features are the ops and qtool features the model exercises beyond a plain classifier.
	Features []string `json:"features"`
	// Needs maps each known engine defect that still affects the model to the reason; the
	// tests assert that exactly these show, so that a fix flips the expectation.
	Needs   map[string]string `json:"needs"`
	Samples int               `json:"samples"`
	// Heldout is an npz of HeldoutSamples other samples of the same distribution, never
	// given to binarize for training: the data its fidelity is measured on.
	Heldout        string `json:"heldout"`
	HeldoutSamples int    `json:"heldout_samples"`
}

// Manifest is manifest.json.
type Manifest struct {
	ScriptSHA256 string  `json:"script_sha256"`
	Torch        string  `json:"torch"`
	Torchvision  string  `json:"torchvision"`
	ONNX         string  `json:"onnx"`
	Models       []Model `json:"models"`
}

// ScriptHash returns the SHA-256 of make.py in dir (this package's folder).
func ScriptHash(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, "make.py"))
	if err != nil {
		return "", err
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:]), nil
}

// Load reads the manifest in dir.
func Load(dir string) (*Manifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return nil, err
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "manifest.json"), err)
	}
	return &m, nil
}

// Ensure returns the corpus in cache, generating it with make.py from srcDir when it is
// missing or stale (its manifest records another make.py). It generates into a sibling
// folder and renames it into place, so that an interrupted run never leaves a half corpus
// that looks complete. regenerated reports whether make.py ran; log receives its output.
func Ensure(srcDir, cache string) (m *Manifest, regenerated bool, log []byte, err error) {
	want, err := ScriptHash(srcDir)
	if err != nil {
		return nil, false, nil, err
	}
	if m, err := Load(cache); err == nil && m.ScriptSHA256 == want {
		return m, false, nil, nil
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil, err
	}
	if err := os.MkdirAll(filepath.Dir(cache), 0o755); err != nil {
		return nil, false, nil, err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(cache), filepath.Base(cache)+".tmp-")
	if err != nil {
		return nil, false, nil, err
	}
	defer os.RemoveAll(tmp)
	cmd := exec.Command(Python, filepath.Join(srcDir, "make.py"), tmp)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return nil, true, out.Bytes(), fmt.Errorf("%s %s failed (%v); its output ends:\n%s",
			Python, filepath.Join(srcDir, "make.py"), err, tail(out.String(), 30))
	}
	if m, err = Load(tmp); err != nil {
		return nil, true, out.Bytes(), fmt.Errorf("make.py wrote no usable manifest: %w", err)
	}
	if m.ScriptSHA256 != want {
		return nil, true, out.Bytes(), fmt.Errorf("make.py changed while it ran (manifest hash %s, file %s)", m.ScriptSHA256, want)
	}
	if err := os.RemoveAll(cache); err != nil {
		return nil, true, out.Bytes(), err
	}
	if err := os.Rename(tmp, cache); err != nil {
		return nil, true, out.Bytes(), err
	}
	return m, true, out.Bytes(), nil
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// ModuleRoot walks up from dir to the folder holding go.mod.
func ModuleRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above " + dir)
		}
		dir = parent
	}
}
