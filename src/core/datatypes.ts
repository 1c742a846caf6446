import type { Tensor } from 'onnxruntime-node';

/** The KServe v2 tensor datatypes batchserve serves, in the protocol's spelling. */
export const DATATYPES = [
  'BOOL',
  'UINT8',
  'UINT16',
  'UINT32',
  'UINT64',
  'INT8',
  'INT16',
  'INT32',
  'INT64',
  'FP16',
  'FP32',
  'FP64',
  'BYTES',
] as const;

export type Datatype = (typeof DATATYPES)[number];

const ORT_TYPE_OF: Record<Datatype, Tensor.Type> = {
  BOOL: 'bool',
  UINT8: 'uint8',
  UINT16: 'uint16',
  UINT32: 'uint32',
  UINT64: 'uint64',
  INT8: 'int8',
  INT16: 'int16',
  INT32: 'int32',
  INT64: 'int64',
  FP16: 'float16',
  FP32: 'float32',
  FP64: 'float64',
  BYTES: 'string',
};

const DATATYPE_OF = new Map<string, Datatype>(
  Object.entries(ORT_TYPE_OF).map(([datatype, ortType]) => [ortType, datatype as Datatype]),
);

export function isDatatype(value: unknown): value is Datatype {
  return typeof value === 'string' && (DATATYPES as readonly string[]).includes(value);
}

export function ortTypeOf(datatype: Datatype): Tensor.Type {
  return ORT_TYPE_OF[datatype];
}

/** The KServe datatype of an onnxruntime tensor type, or undefined for types v2 cannot carry. */
export function datatypeOfOrtType(ortType: string): Datatype | undefined {
  return DATATYPE_OF.get(ortType);
}

type NumericOrtType = Exclude<Tensor.Type, 'string'>;

type NumericArrayConstructor = (new (length: number) => Exclude<Tensor.DataType, string[]>) & {
  readonly BYTES_PER_ELEMENT: number;
};

const TYPED_ARRAY_OF: Record<NumericOrtType, NumericArrayConstructor> = {
  bool: Uint8Array,
  uint8: Uint8Array,
  int8: Int8Array,
  uint16: Uint16Array,
  int16: Int16Array,
  uint32: Uint32Array,
  int32: Int32Array,
  uint64: BigUint64Array,
  int64: BigInt64Array,
  float16: Uint16Array,
  float32: Float32Array,
  float64: Float64Array,
  uint4: Uint8Array,
  int4: Int8Array,
};

/** Zeroed tensor data of `length` elements in the typed array onnxruntime expects for `type`. */
export function allocateTensorData(type: Tensor.Type, length: number): Tensor.DataType {
  if (type === 'string') return new Array<string>(length).fill('');
  return new TYPED_ARRAY_OF[type](length);
}

/** Bytes one element of a numeric type takes in a typed array. */
export function bytesPerElement(type: NumericOrtType): number {
  return TYPED_ARRAY_OF[type].BYTES_PER_ELEMENT;
}

/**
 * The tensor data that `bytes` hold, as the typed array onnxruntime expects for `type`: a
 * view when the bytes are aligned for it, else a copy.
 */
export function tensorDataFromBytes(type: NumericOrtType, bytes: Uint8Array): Exclude<Tensor.DataType, string[]> {
  const TypedArray = TYPED_ARRAY_OF[type] as unknown as new (
    buffer: ArrayBufferLike,
    byteOffset: number,
    length: number,
  ) => Exclude<Tensor.DataType, string[]>;
  const size = TYPED_ARRAY_OF[type].BYTES_PER_ELEMENT;
  // new Uint8Array(view) copies; a Buffer's own slice() would not.
  const aligned = bytes.byteOffset % size === 0 ? bytes : new Uint8Array(bytes);
  return new TypedArray(aligned.buffer, aligned.byteOffset, aligned.byteLength / size);
}
