import { defineProperties } from "../support/property.ts";

await defineProperties("postgres");
