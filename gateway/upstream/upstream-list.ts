// The replicas' URLs as the user gives them: `--upstream A,B,…` or an upstreams file (one URL per line, `#` comments),
// which an autoscaler rewrites while the gateway runs. Watching it reloads the list; a file that cannot be read or
// holds a bad line keeps the list the gateway has and says why.
import { watch, readFileSync, type FSWatcher } from "node:fs";
import { basename, dirname } from "node:path";
import { RlgateError } from "../../util/errors.ts";

export class UpstreamListError extends RlgateError<"RLGATE_BAD_UPSTREAMS"> {
  constructor(message: string, options?: { cause?: unknown }) {
    super("RLGATE_BAD_UPSTREAMS", message, options);
    this.name = "UpstreamListError";
  }
}

/** One replica URL, checked: http(s), no query or fragment. `where` says where it came from, for the error. */
export function checkUpstreamUrl(value: string, where: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch (cause) {
    throw new UpstreamListError(`${where}: '${value}' is not a URL (expected e.g. http://10.0.0.5:8000)`, { cause });
  }
  if (url.protocol !== "http:" && url.protocol !== "https:")
    throw new UpstreamListError(`${where}: '${value}' is not an http(s) URL`);
  if (url.search || url.hash) throw new UpstreamListError(`${where}: '${value}' has a query or fragment`);
  return value.replace(/\/+$/, "");
}

/** `A,B , C` (or several such values) → the distinct URLs in order. */
export function parseUpstreamList(value: string | readonly string[]): string[] {
  const parts = (typeof value === "string" ? [value] : value).flatMap((v) => v.split(","));
  const urls = parts.map((p) => p.trim()).filter((p) => p !== "");
  return [...new Set(urls.map((url) => checkUpstreamUrl(url, "--upstream")))];
}

/** An upstreams file's URLs: one per line, blank lines and `#` comments (whole-line or trailing) ignored. */
export function parseUpstreamsFile(text: string, path: string): string[] {
  const urls: string[] = [];
  text.split(/\r?\n/).forEach((line, index) => {
    const value = line.replace(/#.*$/, "").trim();
    if (value !== "") urls.push(checkUpstreamUrl(value, `${path}:${index + 1}`));
  });
  if (urls.length === 0) throw new UpstreamListError(`${path} lists no upstream URL`);
  return [...new Set(urls)];
}

export function readUpstreamsFile(path: string): string[] {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (cause) {
    throw new UpstreamListError(`cannot read the upstreams file ${path}: ${(cause as Error).message}`, { cause });
  }
  return parseUpstreamsFile(text, path);
}

export interface UpstreamsFileWatch {
  close(): void;
}

/**
 * Calls `onList` with the file's URLs each time it changes, `onError` when a change left it unreadable or bad. The
 * folder is watched, not the file: an editor or a Kubernetes ConfigMap replaces the file by a rename, which a watch
 * on the old file would not see.
 */
export function watchUpstreamsFile(
  path: string,
  onList: (urls: string[]) => void,
  onError: (error: UpstreamListError) => void,
  debounceMs = 100,
): UpstreamsFileWatch {
  let timer: NodeJS.Timeout | null = null;
  let last: string | null = null;
  const reload = () => {
    timer = null;
    try {
      const urls = readUpstreamsFile(path);
      const key = urls.join("\n");
      if (key === last) return;
      last = key;
      onList(urls);
    } catch (error) {
      last = null;
      onError(error as UpstreamListError);
    }
  };
  try {
    last = readUpstreamsFile(path).join("\n");
  } catch {
    last = null;
  }
  const name = basename(path);
  const watcher: FSWatcher = watch(dirname(path), { persistent: false }, (_event, changed) => {
    // A ConfigMap swaps a `..data` link: any change in the folder may be ours, and reading unchanged content is a no-op.
    if (changed !== null && changed !== name && !String(changed).startsWith("..")) return;
    if (timer) clearTimeout(timer);
    timer = setTimeout(reload, debounceMs);
  });
  watcher.on("error", (cause) =>
    onError(new UpstreamListError(`watching ${path} failed: ${cause.message}`, { cause })),
  );
  return {
    close() {
      if (timer) clearTimeout(timer);
      watcher.close();
    },
  };
}
