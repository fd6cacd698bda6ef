// Two independent Parquet readers for tests: hyparquet (pure JS) and DuckDB's C++ reader. A file both read the same
// way is a file pyarrow, pandas and Spark read too; a writer bug one reader forgives, the other usually does not.
import { asyncBufferFromFile, parquetMetadataAsync, parquetReadObjects } from "hyparquet";

/** Every row as an object, by hyparquet (INT64 as bigint). */
export async function hyparquetRows(path: string): Promise<Record<string, any>[]> {
  return parquetReadObjects({ file: await asyncBufferFromFile(path) });
}

export async function hyparquetRowGroups(path: string): Promise<number> {
  return (await parquetMetadataAsync(await asyncBufferFromFile(path))).row_groups.length;
}

/** Every row as an object, by DuckDB, in file order (its JSON form: BIGINT as a string, lists as arrays). */
export async function duckdbRows(path: string): Promise<Record<string, any>[]> {
  const { DuckDBInstance } = await import("@duckdb/node-api");
  const db = await DuckDBInstance.create(":memory:");
  const connection = await db.connect();
  try {
    const reader = await connection.runAndReadAll(`select * from read_parquet('${path.replaceAll("'", "''")}')`);
    return reader.getRowObjectsJson() as Record<string, any>[];
  } finally {
    connection.closeSync();
    db.closeSync();
  }
}
