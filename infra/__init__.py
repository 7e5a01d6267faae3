"""The CDK app that deploys a lunaflow project (see docs/deploy in the README)."""
