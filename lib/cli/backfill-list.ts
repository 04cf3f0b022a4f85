/**
 * `ratchet-aws backfill-list --stack NAME`: once, after upgrading a stack
 * deployed before `GET /operations` read its list from the history table:
 * every operation's latest item written there (engines/dynamodb/list-backfill.ts).
 *
 * AWS credentials and region come from the environment, as for `cdk deploy`.
 */
import { CloudFormationClient, DescribeStacksCommand } from '@aws-sdk/client-cloudformation';
import { failure, parseCommandLine, usageError } from '../../app/command-line.ts';
import { backfillList, historyTable, openDynamoDb } from '../../engines/dynamodb/index.ts';

const command = {
  name: 'ratchet-aws backfill-list',
  usage: `usage: ratchet-aws backfill-list --stack NAME
  --stack NAME   the deployed stack (required; AWS credentials and region from the environment)`,
  options: { stack: { type: 'string' } },
} as const;

async function main(): Promise<void> {
  const { values } = parseCommandLine(command);
  const stackName = values.stack;
  if (!stackName) usageError(command, '--stack NAME is required');
  const { Stacks } = await new CloudFormationClient({}).send(new DescribeStacksCommand({ StackName: stackName }));
  const output = (key: string) => {
    const value = Stacks?.[0]?.Outputs?.find((o) => o.OutputKey === key)?.OutputValue;
    if (!value) throw new Error(`stack ${stackName} has no output ${key} (deploy this version of the construct first)`);
    return value;
  };
  const { documents, history } = openDynamoDb({ tables: { history: historyTable(output('HistoryTableName')) } });
  const operations = await backfillList(documents, output('TableName'), history);
  console.log(`${operations} operations listed in ${output('HistoryTableName')}`);
}

try {
  await main();
} catch (error) {
  failure(command, (error as Error).message);
}
