// The CustomResourceDefinitions of App and RunLog, built from their TypeBox schemas.
import type { TSchema } from '@sinclair/typebox';
import { AppNameSchema, AppSpecSchema, AppStatusSchema } from './app-schema.ts';
import { APP_KIND, APP_PLURAL, RUNLET_GROUP, RUNLET_VERSION, RUNLOG_KIND, RUNLOG_PLURAL } from './api-group.ts';
import { RunLogSpecSchema, RunLogStatusSchema } from './runlog-schema.ts';
import { toStructuralSchema, type StructuralSchema } from './structural-schema.ts';

export interface PrinterColumn {
  name: string;
  type: 'integer' | 'number' | 'string' | 'boolean' | 'date';
  jsonPath: string;
  description?: string;
  priority?: number;
}

export interface CustomResourceDefinition {
  apiVersion: 'apiextensions.k8s.io/v1';
  kind: 'CustomResourceDefinition';
  metadata: { name: string; labels: Record<string, string> };
  spec: {
    group: string;
    names: { kind: string; listKind: string; plural: string; singular: string; shortNames?: string[]; categories: string[] };
    scope: 'Namespaced';
    versions: {
      name: string;
      served: true;
      storage: true;
      subresources: { status: Record<string, never> };
      additionalPrinterColumns: PrinterColumn[];
      schema: { openAPIV3Schema: StructuralSchema };
    }[];
  };
}

interface ResourceDefinition {
  kind: string;
  plural: string;
  shortNames?: string[];
  description: string;
  /** Restrictions on metadata.name; the only metadata a structural schema may constrain. */
  name?: TSchema;
  spec: TSchema;
  status: TSchema;
  columns: PrinterColumn[];
}

const AGE_COLUMN: PrinterColumn = { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' };

export function appCrd(): CustomResourceDefinition {
  return customResourceDefinition({
    kind: APP_KIND,
    plural: APP_PLURAL,
    description: 'An app: a Python module or an HTTP server image, served over the Runlet run interface.',
    name: AppNameSchema,
    spec: AppSpecSchema,
    status: AppStatusSchema,
    columns: [
      { name: 'Desired', type: 'integer', jsonPath: '.status.desiredReplicas', description: 'Replicas the autoscaler wants.' },
      { name: 'Ready', type: 'integer', jsonPath: '.status.readyReplicas', description: 'Replicas ready to take runs.' },
      { name: 'Scaling', type: 'string', jsonPath: '.status.lastScaling.reason', description: "The autoscaler's last decision.", priority: 1 },
      { name: 'URL', type: 'string', jsonPath: '.status.url', description: 'Base URL of the run interface.' },
      AGE_COLUMN,
    ],
  });
}

export function runLogCrd(): CustomResourceDefinition {
  return customResourceDefinition({
    kind: RUNLOG_KIND,
    plural: RUNLOG_PLURAL,
    shortNames: ['rl'],
    description: 'The runs of one replica of an App: those in flight and the last finished ones.',
    spec: RunLogSpecSchema,
    status: RunLogStatusSchema,
    columns: [
      { name: 'App', type: 'string', jsonPath: '.spec.appName' },
      { name: 'Runs', type: 'integer', jsonPath: '.status.counts.total', description: 'Runs since the replica started.' },
      AGE_COLUMN,
    ],
  });
}

function customResourceDefinition(resource: ResourceDefinition): CustomResourceDefinition {
  const metadata: StructuralSchema = { type: 'object' };
  if (resource.name) metadata.properties = { name: toStructuralSchema(resource.name, 'metadata.name') };
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${resource.plural}.${RUNLET_GROUP}`, labels: { 'app.kubernetes.io/part-of': 'runlet' } },
    spec: {
      group: RUNLET_GROUP,
      names: {
        kind: resource.kind,
        listKind: `${resource.kind}List`,
        plural: resource.plural,
        singular: resource.kind.toLowerCase(),
        ...(resource.shortNames ? { shortNames: resource.shortNames } : {}),
        categories: ['runlet'],
      },
      scope: 'Namespaced',
      versions: [
        {
          name: RUNLET_VERSION,
          served: true,
          storage: true,
          subresources: { status: {} },
          additionalPrinterColumns: resource.columns,
          schema: {
            openAPIV3Schema: {
              description: resource.description,
              type: 'object',
              properties: {
                apiVersion: { type: 'string' },
                kind: { type: 'string' },
                metadata,
                spec: toStructuralSchema(resource.spec, 'spec'),
                status: toStructuralSchema(resource.status, 'status'),
              },
              required: ['spec'],
            },
          },
        },
      ],
    },
  };
}
