// Types of architecture.mjs for the test that imports it.
export const DOC: string;
export function folderEdges(): string[];
export function drawing(edges: string[]): string;
export function currentDrawing(): string | null;
