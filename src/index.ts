export * from "./core/index.ts";
export * from "./worker/index.ts";
