"""Runs in a fresh interpreter with numpy imported first, as in Kaggle's harness: the time to import torch and set up
the torch backend.  argv: model path, batch size.  Prints one JSON line.
"""
import json
import sys
import time

import numpy

start = time.perf_counter()
import torch  # noqa: E402  (timed: the import is what is measured)

imported = time.perf_counter()
from connectx_az.agent import onnx_torch  # noqa: E402

data = open(sys.argv[1], "rb").read()
loaded = time.perf_counter()
model = onnx_torch.TorchOnnxModel(data)
built = time.perf_counter()
model.evaluate(numpy.zeros((1, 2, 6, 7), numpy.uint8))
model.evaluate(numpy.zeros((int(sys.argv[2]), 2, 6, 7), numpy.uint8))
done = time.perf_counter()
print(json.dumps({"import_seconds": imported - start, "build_seconds": built - loaded,
                  "first_calls_seconds": done - built, "torch": torch.__version__}))
