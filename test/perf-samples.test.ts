// bench/perf-steps.ts's reading of `perf script`: samples taken from a real run (stacks cut short), each charged to
// the place the docs' per-step tables name.
import assert from "node:assert/strict";
import { test } from "node:test";
import { placeOf, samples } from "../bench/perf-samples.ts";

const ROOT = "/work/main";
const SCRIPT = `node  2874/2874   1436.141232:     500000 cpu-clock: 
\tffffffff8225f759 pvm_irq_enable ([kernel.kallsyms])
\tffffffff813ae452 finish_task_switch.isra.0 ([kernel.kallsyms])
\tffffffff81753558 do_epoll_wait ([kernel.kallsyms])
\tffffffff81754e7c __x64_sys_epoll_pwait ([kernel.kallsyms])
\tffffffff8225a101 do_syscall_64 ([kernel.kallsyms])
\tffffffff81000130 entry_SYSCALL_64_after_hwframe ([kernel.kallsyms])
\t          108cae epoll_pwait (/usr/lib/x86_64-linux-gnu/libc.so.6)

node  2874/2874   1436.141240:     500000 cpu-clock: 
\tffffffff8225f759 pvm_irq_enable ([kernel.kallsyms])
\tffffffff81423941 exit_to_user_mode_loop ([kernel.kallsyms])
\tffffffff8225a2e0 do_syscall_64 ([kernel.kallsyms])
\tffffffff81000130 entry_SYSCALL_64_after_hwframe ([kernel.kallsyms])
\t           fde9d __GI___writev (/usr/lib/x86_64-linux-gnu/libc.so.6)
\t          9dd4a6 non-virtual thunk to node::LibuvStreamWrap::DoTryWrite(uv_buf_t**, unsigned long*) (/usr/bin/node)
\t    7f4b200c957b JS:*writevGeneric node:internal/stream_base_commons:123:23 (/tmp/perf-2874.map)

node  2874/2874   1436.141250:     500000 cpu-clock: 
\tffffffff8225fc26 exc_page_fault ([kernel.kallsyms])
\tffffffff81000c82 asm_exc_page_fault ([kernel.kallsyms])
\t         14cd7b7 Builtins_FastNewObject (/usr/bin/node)
\t    7f4b2009eaef JS:^parserOnHeadersComplete node:_http_common:71:33 (/tmp/perf-2874.map)

node  2874/2874   1436.141260:     500000 cpu-clock: 
\t         15ac59a Builtins_RegExpPrototypeExec (/usr/bin/node)
\t    7f4b200d325f JS:*scanChunk file:///work/main/gateway/upstream/chat-chunk-scan.ts:150:8 (/tmp/perf-2874.map)
\t    7f4b200aced5 JS:^relay /work/main/gateway/relay/native.ts:130:3 (/tmp/perf-2874.map)

node  2874/2874   1436.141270:     500000 cpu-clock: 
\t    7f4b200d3000 JS:*Parser.onHeadersComplete /work/main/node_modules/undici/lib/dispatcher/client-h1.js:600:22 (/tmp/perf-2874.map)

node  2874/2874   1436.141280:     500000 cpu-clock: 
\t    7f4b200d3100 JS:~pack /work/main/node_modules/@scope/codec/pack.js:10:3 (/tmp/perf-2874.map)

node  2874/2874   1436.141290:     500000 cpu-clock: 
\t           35a10 mdb_page_alloc (/work/main/node_modules/@lmdb/lmdb-linux-x64/node.abi115.glibc.node)
\t               0 [unknown] ([unknown])

node  2874/2876   1436.168548:     500000 cpu-clock: 
\t         20e7580 v8::internal::compiler::BytecodeGraphBuilder::BytecodeGraphBuilder (/usr/bin/node)
\t           891f5 start_thread (/usr/lib/x86_64-linux-gnu/libc.so.6)
`;

test("perf script's samples are charged to a system call, the innermost JavaScript file, or a library", () => {
  const all = [...samples(SCRIPT)];
  assert.equal(all.length, 8);
  assert.deepEqual(
    all.map((s) => placeOf(s.tid === "2874", s.frames, ROOT)),
    [
      "kernel: epoll_pwait",
      // rescheduled on the way out of the call: named by its libc wrapper
      "kernel: writev",
      // a page fault taken by JavaScript counts to that JavaScript
      "node:_http_common",
      // a builtin counts to the file that called it
      "gateway/upstream/chat-chunk-scan.ts",
      "node_modules/undici",
      "node_modules/@scope/codec",
      "native: node.abi115.glibc.node",
      "other threads · native: node",
    ],
  );
});
