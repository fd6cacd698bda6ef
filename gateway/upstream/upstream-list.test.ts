import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parseUpstreamList, parseUpstreamsFile } from "./upstream-list.ts";

describe("upstream lists", () => {
  it("--upstream: comma-separated, trimmed, trailing slashes dropped, duplicates once", () => {
    assert.deepEqual(parseUpstreamList("http://a:8000/, http://b:8000,,http://a:8000"), [
      "http://a:8000",
      "http://b:8000",
    ]);
    assert.deepEqual(parseUpstreamList(["http://a:1", "http://b:2/v1"]), ["http://a:1", "http://b:2/v1"]);
  });

  it("--upstream: what is not an http(s) URL is named", () => {
    assert.throws(() => parseUpstreamList("http://a:1,a:1"), /--upstream: 'a:1' is not an http\(s\) URL/);
    assert.throws(() => parseUpstreamList("nothing here"), /'nothing here' is not a URL/);
    assert.throws(() => parseUpstreamList("http://a:1/?x=1"), /has a query or fragment/);
  });

  it("a file: one URL a line, blank lines and # comments ignored", () => {
    const text = "# fleet A\nhttp://10.0.0.1:8000\n\n  http://10.0.0.2:8000  # the second\r\nhttp://10.0.0.1:8000\n";
    assert.deepEqual(parseUpstreamsFile(text, "f.txt"), ["http://10.0.0.1:8000", "http://10.0.0.2:8000"]);
  });

  it("a file: a bad line is named with its line number; a file listing nothing is refused", () => {
    assert.throws(() => parseUpstreamsFile("http://a:1\n\nftp://b\n", "f.txt"), /f\.txt:3: 'ftp:\/\/b' is not an http/);
    assert.throws(() => parseUpstreamsFile("# nothing\n\n", "f.txt"), /f\.txt lists no upstream URL/);
  });
});
