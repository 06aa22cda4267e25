// The part of metav1.ObjectMeta that Runlet reads or writes. Other metadata fields are allowed and kept:
// the apiserver owns them.
import { Type, type TString } from '@sinclair/typebox';

export function objectMetaSchema<Name extends TString>(name: Name) {
  const StringMap = Type.Record(Type.String(), Type.String());
  return Type.Object(
    {
      name,
      namespace: Type.Optional(Type.String()),
      labels: Type.Optional(StringMap),
      annotations: Type.Optional(StringMap),
      uid: Type.Optional(Type.String()),
      resourceVersion: Type.Optional(Type.String()),
      generation: Type.Optional(Type.Integer()),
      creationTimestamp: Type.Optional(Type.String()),
      deletionTimestamp: Type.Optional(Type.String()),
      finalizers: Type.Optional(Type.Array(Type.String())),
      ownerReferences: Type.Optional(
        Type.Array(
          Type.Object({
            apiVersion: Type.String(),
            kind: Type.String(),
            name: Type.String(),
            uid: Type.String(),
            controller: Type.Optional(Type.Boolean()),
            blockOwnerDeletion: Type.Optional(Type.Boolean()),
          }),
        ),
      ),
    },
    { additionalProperties: true },
  );
}
