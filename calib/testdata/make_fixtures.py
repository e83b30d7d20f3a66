#!/usr/bin/python3
"""Makes the reference fixtures of calib's tests with NumPy and PIL (Debian python3-numpy,
python3-pil): run with /usr/bin/python3 from calib/testdata. The outputs are committed, so the
Go tests need neither.

numpy/: arrays saved by NumPy itself in the variants np.save and np.savez write.
pil/: PNG images and what PIL (the library torchvision's transforms use on images) makes of
them with Resize(16) + CenterCrop(16), Resize((16,16)) and Grayscale.
"""
import os

import numpy as np
from PIL import Image

rng = np.random.default_rng(6)
os.makedirs("numpy", exist_ok=True)
os.makedirs("pil/imgs", exist_ok=True)

# NumPy formats.
x = (np.arange(4 * 2 * 3, dtype=np.float32).reshape(4, 2, 3) - 5) / 4
np.save("numpy/x_be.npy", x.astype(">f4"))
np.save("numpy/x_f8.npy", x.astype(np.float64))
np.save("numpy/x_fortran.npy", np.asfortranarray(x))
with open("numpy/x_v2.npy", "wb") as f:
    np.lib.format.write_array(f, x, version=(2, 0))
np.save("numpy/y_i4.npy", np.array([3, 0, 2, 1], dtype=np.int32))
np.save("numpy/y_onehot.npy", np.eye(4, dtype=np.int64))
imgs = rng.integers(0, 256, size=(5, 6, 7, 3), dtype=np.uint8)  # NHWC
np.savez_compressed("numpy/nhwc_compressed.npz", images=imgs, labels=np.arange(5, dtype=np.int64))
np.savez("numpy/nchw.npz", x=imgs.transpose(0, 3, 1, 2).copy(), y=np.arange(5, dtype=np.uint8))
np.save("numpy/nhwc_ref.npy", imgs)


def center_crop(im, n):
    """torchvision's CenterCrop offsets: int(round((size - n) / 2))."""
    w, h = im.size
    top = int(round((h - n) / 2.0))
    left = int(round((w - n) / 2.0))
    return im.crop((left, top, left + n, top + n))


def resize_shorter(im, n):
    """torchvision's Resize(n): shorter side to n, the longer int(n * long / short)."""
    w, h = im.size
    if w <= h:
        size = (n, int(n * h / w))
    else:
        size = (int(n * w / h), n)
    return im.resize(size, Image.BILINEAR)


expected = {}
shapes = {"a": (37, 23), "b": (23, 37), "c": (64, 48), "d": (9, 11)}  # (width, height)
for name, (w, h) in shapes.items():
    px = rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)
    # Smooth a little so that resampling is not dominated by noise.
    px = ((px.astype(np.int32) + np.roll(px, 1, 0) + np.roll(px, 1, 1)) // 3).astype(np.uint8)
    im = Image.fromarray(px, "RGB")
    im.save(f"pil/imgs/{name}.png")
    expected[f"{name}_crop"] = np.asarray(center_crop(resize_shorter(im, 16), 16))
    expected[f"{name}_stretch"] = np.asarray(im.resize((16, 16), Image.BILINEAR))
    gray = im.convert("L")
    expected[f"{name}_gray"] = np.asarray(gray)
    expected[f"{name}_gray_crop"] = np.asarray(center_crop(resize_shorter(gray, 16), 16))
np.savez("pil/expected.npz", **expected)
