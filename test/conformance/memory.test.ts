import { defineConformance } from "../support/conformance.ts";

await defineConformance("memory");
