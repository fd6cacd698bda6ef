// Parquet export: one row per trajectory, the per-token arrays as nested LIST columns, which pyarrow and pandas read
// as one numpy array per row and DuckDB as typed lists. Rows are buffered up to a token budget and written as one
// row group at a time, so memory holds one row group, not the export; the file is written beside its destination
// and renamed into place when complete, so a failed export never leaves a truncated file under the name asked for.
import { open, rename, rm, type FileHandle } from "node:fs/promises";
import { ByteWriter, ParquetWriter, type ColumnSource, type SchemaElement } from "hyparquet-writer";
import type { ExportRow, ExportSink } from "./export.ts";

type Repetition = "REQUIRED" | "OPTIONAL";

export interface Column<R = ExportRow> {
  name: string;
  /** The column's schema elements, the column's own first (a LIST adds its `list` and `element`). */
  schema: SchemaElement[];
  value(row: R): unknown;
}

export const scalar = <R = ExportRow>(
  name: string,
  element: Omit<SchemaElement, "name" | "repetition_type">,
  repetition: Repetition,
  value: (row: R) => unknown,
): Column<R> => ({ name, schema: [{ name, ...element, repetition_type: repetition }], value });

export const STRING = { type: "BYTE_ARRAY", converted_type: "UTF8" } as const;

/** The standard three-level LIST (`name` → repeated `list` → `element`) that pyarrow, Spark and DuckDB write. */
export function list<R = ExportRow>(
  name: string,
  element: SchemaElement[],
  repetition: Repetition,
  value: (row: R) => unknown,
): Column<R> {
  return {
    name,
    schema: [
      { name, repetition_type: repetition, converted_type: "LIST", num_children: 1 },
      { name: "list", repetition_type: "REPEATED", num_children: 1 },
      ...element,
    ],
    value,
  };
}

export const element = (type: Omit<SchemaElement, "name" | "repetition_type">, repetition: Repetition = "REQUIRED") => [
  { name: "element", ...type, repetition_type: repetition },
];

/** Per-token policy versions as runs over positions (export-versions.ts): list<struct<start int32, version string>>. */
export function versionRunsColumn<R>(name: string, value: (row: R) => unknown): Column<R> {
  return list(
    name,
    [
      { name: "element", repetition_type: "REQUIRED", num_children: 2 },
      { name: "start", type: "INT32", repetition_type: "REQUIRED" },
      { name: "version", ...STRING, repetition_type: "OPTIONAL" },
    ],
    "REQUIRED",
    value,
  );
}

/** The columns, in file order. docs/replay.md lists them with their types; keep the two together. */
export const PARQUET_COLUMNS: readonly Column[] = [
  scalar("rollout_id", STRING, "REQUIRED", (r) => r.rollout_id),
  scalar("trajectory_index", { type: "INT32" }, "REQUIRED", (r) => r.trajectory_index),
  scalar("trajectory_id", STRING, "REQUIRED", (r) => r.trajectory_id),
  scalar("group", STRING, "OPTIONAL", (r) => r.group),
  scalar("task", STRING, "OPTIONAL", (r) => r.task),
  scalar("harness", STRING, "OPTIONAL", (r) => r.harness),
  scalar("policy_version", STRING, "OPTIONAL", (r) => r.policy_version),
  scalar("status", STRING, "REQUIRED", (r) => r.status),
  scalar("reward", { type: "DOUBLE" }, "OPTIONAL", (r) => r.reward),
  scalar("segment", STRING, "REQUIRED", (r) => r.segment),
  scalar("segment_id", { type: "INT32" }, "REQUIRED", (r) => r.segment_id),
  scalar("trained", { type: "BOOLEAN" }, "REQUIRED", (r) => r.trained),
  scalar("flagged", { type: "BOOLEAN" }, "REQUIRED", (r) => r.flagged),
  list("flag_reasons", element(STRING), "REQUIRED", (r) => r.flag_reasons),
  scalar("num_tokens", { type: "INT32" }, "REQUIRED", (r) => r.num_tokens),
  list("token_ids", element({ type: "INT32" }), "REQUIRED", (r) => r.token_ids),
  // uint8 as the gRPC batches carry it: numpy/torch read 0/1 integers that multiply and sum as they are.
  list("loss_mask", element({ type: "INT32", converted_type: "UINT_8" }), "REQUIRED", (r) => r.loss_mask),
  // float32 as captured; an element is null where the upstream sent no logprob (the rollout is then flagged).
  list("logprobs", element({ type: "FLOAT" }, "OPTIONAL"), "REQUIRED", (r) => r.logprobs),
  list("advantages", element({ type: "FLOAT" }), "OPTIONAL", (r) => r.advantages),
  list(
    "spans",
    [
      { name: "element", repetition_type: "REQUIRED", num_children: 5 },
      { name: "start", type: "INT32", repetition_type: "REQUIRED" },
      { name: "end", type: "INT32", repetition_type: "REQUIRED" },
      { name: "call_seq", type: "INT64", repetition_type: "REQUIRED" },
      { name: "choice_index", type: "INT32", repetition_type: "REQUIRED" },
      { name: "kind", ...STRING, repetition_type: "REQUIRED" },
    ],
    "REQUIRED",
    // Call seqs are microsecond-scale stamps beyond int32; the writer takes INT64 values as bigints.
    (r) => r.spans.map((s) => ({ ...s, call_seq: BigInt(s.call_seq) })),
  ),
  scalar("breaks", { type: "INT32" }, "REQUIRED", (r) => r.breaks),
  versionRunsColumn("version_runs", (r) => r.version_runs),
  // MoE routing replay: flat [num_tokens × moe_layers × moe_top_k] expert indexes; null without routing.
  list(
    "routed_experts",
    element({ type: "INT32", converted_type: "UINT_16" }),
    "OPTIONAL",
    (r) => r.routed_experts ?? null,
  ),
  scalar("moe_layers", { type: "INT32" }, "OPTIONAL", (r) => r.moe_layers ?? null),
  scalar("moe_top_k", { type: "INT32" }, "OPTIONAL", (r) => r.moe_top_k ?? null),
];

const schemaOf = (columns: readonly Column<any>[]): SchemaElement[] => [
  { name: "root", num_children: columns.length },
  ...columns.flatMap((c) => c.schema),
];

/** hyparquet-writer's byte buffer, emptied to a file after each row group (ParquetWriter awaits the flush). */
class FileWriter extends ByteWriter {
  readonly #file: FileHandle;
  constructor(file: FileHandle) {
    super(1 << 20);
    this.#file = file;
  }
  async flush(): Promise<void> {
    const bytes = this.getBytes();
    let done = 0;
    while (done < bytes.length) done += (await this.#file.write(bytes, done, bytes.length - done)).bytesWritten;
    this.index = 0;
  }
  override finish(): Promise<void> {
    return this.flush();
  }
}

export interface ParquetSinkOptions<R = ExportRow> {
  /** A row group is written once the buffered rows hold this many tokens (default 262,144). */
  rowGroupTokens?: number;
  /** The file's created_by. */
  createdBy?: string;
  /** The columns (default: the trajectory rows' PARQUET_COLUMNS) and a row's token count, for other row shapes. */
  columns?: readonly Column<R>[];
  tokens?: (row: R) => number;
}

export const DEFAULT_ROW_GROUP_TOKENS = 262_144;
// Many short trajectories still make row groups of bounded size.
const MAX_ROW_GROUP_ROWS = 100_000;

export class ParquetSink<R = ExportRow> implements ExportSink<R> {
  readonly #path: string;
  readonly #partial: string;
  readonly #file: FileHandle;
  readonly #writer: FileWriter;
  readonly #parquet: ParquetWriter;
  readonly #rowGroupTokens: number;
  readonly #columns: readonly Column<R>[];
  readonly #tokensOf: (row: R) => number;
  #rows: R[] = [];
  #tokens = 0;
  #rowGroups = 0;

  private constructor(path: string, partial: string, file: FileHandle, options: ParquetSinkOptions<R>) {
    this.#path = path;
    this.#partial = partial;
    this.#file = file;
    this.#writer = new FileWriter(file);
    this.#rowGroupTokens = options.rowGroupTokens ?? DEFAULT_ROW_GROUP_TOKENS;
    this.#columns = options.columns ?? (PARQUET_COLUMNS as unknown as readonly Column<R>[]);
    this.#tokensOf = options.tokens ?? ((row) => (row as unknown as ExportRow).num_tokens);
    this.#parquet = new ParquetWriter({
      writer: this.#writer,
      schema: schemaOf(this.#columns),
      createdBy: options.createdBy ?? "rlgate",
    });
  }

  static async open<R = ExportRow>(path: string, options: ParquetSinkOptions<R> = {}): Promise<ParquetSink<R>> {
    const partial = `${path}.partial-${process.pid}`;
    let file: FileHandle;
    try {
      file = await open(partial, "w");
    } catch (error) {
      throw new Error(`cannot write ${path}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`, {
        cause: error,
      });
    }
    return new ParquetSink<R>(path, partial, file, options);
  }

  get rowGroups(): number {
    return this.#rowGroups;
  }

  async write(rows: readonly R[]): Promise<void> {
    for (const row of rows) {
      this.#rows.push(row);
      this.#tokens += this.#tokensOf(row);
      if (this.#tokens >= this.#rowGroupTokens || this.#rows.length >= MAX_ROW_GROUP_ROWS) await this.#flushRowGroup();
    }
  }

  async #flushRowGroup(): Promise<void> {
    const rows = this.#rows;
    if (rows.length === 0) return;
    this.#rows = [];
    this.#tokens = 0;
    const columnData: ColumnSource[] = this.#columns.map((c) => ({ name: c.name, data: rows.map((r) => c.value(r)) }));
    await this.#parquet.write({ columnData, rowGroupSize: rows.length });
    this.#rowGroups++;
  }

  async finish(): Promise<{ bytes: number }> {
    await this.#flushRowGroup();
    await this.#parquet.finish();
    await this.#file.close();
    await rename(this.#partial, this.#path);
    return { bytes: this.#writer.offset };
  }

  async abort(): Promise<void> {
    await this.#file.close().catch(() => {});
    await rm(this.#partial, { force: true });
  }
}
