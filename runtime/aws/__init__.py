"""The AWS side of the runtime: DynamoDB store (runtime.store.dynamodb), Secrets Manager
secrets, EventBridge Scheduler and SQS wake-ups, and the Lambda-facing worker."""
