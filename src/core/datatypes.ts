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

/** A numeric tensor's elements in the typed array its datatype takes (BOOL as bytes, FP16 as its bits). */
export type NumericData =
  | Float32Array
  | Float64Array
  | Int8Array
  | Uint8Array
  | Int16Array
  | Uint16Array
  | Int32Array
  | Uint32Array
  | BigInt64Array
  | BigUint64Array;

/** Numeric elements, or BYTES elements as strings. */
export type TensorData = NumericData | string[];

type NumericDatatype = Exclude<Datatype, 'BYTES'>;

type DataConstructor = (new (length: number) => NumericData) & {
  readonly BYTES_PER_ELEMENT: number;
};

const DATA_OF: Record<NumericDatatype, DataConstructor> = {
  BOOL: Uint8Array,
  UINT8: Uint8Array,
  UINT16: Uint16Array,
  UINT32: Uint32Array,
  UINT64: BigUint64Array,
  INT8: Int8Array,
  INT16: Int16Array,
  INT32: Int32Array,
  INT64: BigInt64Array,
  FP16: Uint16Array,
  FP32: Float32Array,
  FP64: Float64Array,
};

/** Zeroed elements of `datatype`, `length` of them (BYTES: empty strings). */
export function allocateData(datatype: Datatype, length: number): TensorData {
  if (datatype === 'BYTES') return new Array<string>(length).fill('');
  return new DATA_OF[datatype](length);
}

/** Bytes one element of a numeric datatype takes; 0 for BYTES, whose elements vary. */
export function datatypeSize(datatype: Datatype): number {
  return datatype === 'BYTES' ? 0 : DATA_OF[datatype].BYTES_PER_ELEMENT;
}

/**
 * The elements that `bytes` hold, in the typed array `datatype` takes: a view when the bytes
 * are aligned for it, else a copy.
 */
export function dataFromBytes(datatype: NumericDatatype, bytes: Uint8Array): NumericData {
  const Data = DATA_OF[datatype] as unknown as new (
    buffer: ArrayBufferLike,
    byteOffset: number,
    length: number,
  ) => NumericData;
  const size = DATA_OF[datatype].BYTES_PER_ELEMENT;
  // new Uint8Array(view) copies; a Buffer's own slice() would not.
  const aligned = bytes.byteOffset % size === 0 ? bytes : new Uint8Array(bytes);
  return new Data(aligned.buffer, aligned.byteOffset, aligned.byteLength / size);
}

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
