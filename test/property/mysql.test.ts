import { defineProperties } from "../support/property.ts";

await defineProperties("mysql");
