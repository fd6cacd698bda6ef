// Types of install-native.mjs for the tests that import it.
export function upToDate(root: string): boolean;
export function findCompiler(env?: Record<string, string | undefined>): string | null;
export function installNative(options: {
  root: string;
  env?: Record<string, string | undefined>;
  stdio?: "inherit" | "pipe";
}): { built: boolean; reason: string | null };
