// `pykernel/tool`'s schema where JSON Schema types are expected, as it is (no spread copy):
// compiled by tool.test.js under --strict against the devDependencies' declarations.
import type { JSONSchema7 } from 'json-schema'
import type { Tool } from '@modelcontextprotocol/sdk/types.js'
import { jsonSchema } from 'ai'
import * as python from 'pykernel/tool'

const plain: JSONSchema7 = python.schema
const cell: JSONSchema7 = python.schema.properties.cells.items
const forAiSdk = jsonSchema<python.ToolInput>(python.schema)
const forMcp: Tool = { name: python.name, description: python.description, inputSchema: python.schema }

void [plain, cell, forAiSdk, forMcp]
