"""DLPack and the CUDA driver through ctypes, for the device tests' child processes:
what a consumer such as PyTorch does with a capsule (read the DLManagedTensor, use its
memory, call its deleter), without PyTorch. The driver is whichever libcuda.so.1 the
process loads (the double, in CI), the same library iox loaded."""

import ctypes as c

import numpy as np


class DLDevice(c.Structure):
    _fields_ = [("device_type", c.c_int32), ("device_id", c.c_int32)]


class DLDataType(c.Structure):
    _fields_ = [("code", c.c_uint8), ("bits", c.c_uint8), ("lanes", c.c_uint16)]


class DLTensor(c.Structure):
    _fields_ = [("data", c.c_void_p), ("device", DLDevice), ("ndim", c.c_int32), ("dtype", DLDataType),
                ("shape", c.POINTER(c.c_int64)), ("strides", c.POINTER(c.c_int64)), ("byte_offset", c.c_uint64)]


class DLManagedTensor(c.Structure):
    pass


DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", c.c_void_p),
                            ("deleter", c.CFUNCTYPE(None, c.POINTER(DLManagedTensor)))]

api = c.pythonapi
api.PyCapsule_GetPointer.restype = c.c_void_p
api.PyCapsule_GetPointer.argtypes = [c.py_object, c.c_char_p]
api.PyCapsule_SetName.argtypes = [c.py_object, c.c_char_p]

cuda = c.CDLL("libcuda.so.1")
assert cuda.cuInit(0) == 0
_ctx = c.c_void_p()
assert cuda.cuDevicePrimaryCtxRetain(c.byref(_ctx), 0) == 0
assert cuda.cuCtxPushCurrent_v2(_ctx) == 0

DTYPES = {(2, 32): np.float32, (2, 16): np.float16, (2, 64): np.float64, (1, 8): np.uint8, (0, 32): np.int32,
          (0, 64): np.int64}


class Consumed:
    """A capsule taken over as a consumer does: `dtype`, `shape`, `strides` (in
    elements, as DLPack gives them), `data` (the device address), `span()` (the
    elements from the first to the last as a flat numpy array, copied to the host);
    `done()` renames the capsule and calls the producer's deleter."""

    def __init__(self, capsule):
        self.capsule = capsule
        self.ptr = api.PyCapsule_GetPointer(capsule, b"dltensor")
        api.PyCapsule_SetName(capsule, b"used_dltensor")
        self.managed = DLManagedTensor.from_address(self.ptr)
        t = self.managed.dl_tensor
        self.device = (t.device.device_type, t.device.device_id)
        self.dtype = DTYPES[(t.dtype.code, t.dtype.bits)]
        assert t.dtype.lanes == 1
        self.shape = tuple(t.shape[d] for d in range(t.ndim))
        if t.strides:
            self.strides = tuple(t.strides[d] for d in range(t.ndim))
        else:
            self.strides = tuple(int(s) for s in np.empty(self.shape, np.uint8).strides)
        self.data = t.data + t.byte_offset

    def span(self):
        n = 1 + sum((d - 1) * s for d, s in zip(self.shape, self.strides)) if all(self.shape) else 0
        out = np.zeros(n, self.dtype)
        if n:
            assert cuda.cuMemcpyDtoH_v2(out.ctypes.data_as(c.c_void_p), c.c_uint64(self.data), out.nbytes) == 0
        return out

    def write(self, values):
        values = np.ascontiguousarray(values)
        assert cuda.cuMemcpyHtoD_v2(c.c_uint64(self.data), values.ctypes.data_as(c.c_void_p), values.nbytes) == 0

    def done(self):
        self.managed.deleter(c.cast(self.ptr, c.POINTER(DLManagedTensor)))
