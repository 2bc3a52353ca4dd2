// Prints the SDK's operation table and its Client's methods as JSON (from the built dist/),
// for the drift test that holds them to the API's OpenAPI document.
import { Client, OPERATIONS } from "../dist/index.js";

const methods = Object.entries(Object.getOwnPropertyDescriptors(Client.prototype))
  .filter(([name, d]) => name !== "constructor" && typeof d.value === "function")
  .map(([name]) => name);
process.stdout.write(JSON.stringify({ operations: OPERATIONS, methods }) + "\n");
