package export

import (
	"fmt"

	"github.com/qtool/qtool/onnxio"
)

// An OpsetError reports an opset Export cannot write: an Options.Opset below the model's
// opset or beyond onnxio.MaxOpset, or a model or format that needs a higher opset than the
// export would write. Messages name Options.Opset, never a command-line flag.
type OpsetError struct {
	// Model is the model's name.
	Model string
	// Format is the format that needs opset Need; empty when the model's opset is below
	// MinOpset whatever the format.
	Format Format
	// Have is the opset at fault: Options.Opset when Requested, else the opset the export
	// would write.
	Have      int64
	Requested bool
	// Need is the least opset that works; 0 when Have is beyond the newest.
	Need int64
}

func (e *OpsetError) Error() string {
	switch {
	case e.Requested && e.Need == 0:
		return fmt.Sprintf("export: %s: Options.Opset %d is beyond %d, the newest opset qtool writes", e.Model, e.Have, onnxio.MaxOpset)
	case e.Requested:
		return fmt.Sprintf("export: %s: Options.Opset %d is below the model's opset %d; export never lowers an opset", e.Model, e.Have, e.Need)
	case e.Format == QDQ:
		return fmt.Sprintf("export: %s: the qdq format needs DequantizeLinear, which opset %d lacks: set Options.Opset to %d or later (13 or later for per-channel scales without an extra Mul)", e.Model, e.Have, e.Need)
	}
	return fmt.Sprintf("export: %s: the model imports opset %d; export writes opset %d or later: set Options.Opset to %d or later to raise it", e.Model, e.Have, e.Need, e.Need)
}
