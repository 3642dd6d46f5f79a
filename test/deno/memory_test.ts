import { defineConformance } from "./conformance.ts";

await defineConformance("memory");
