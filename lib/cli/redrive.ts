/**
 * `ratchet-aws redrive --stack NAME`: lists or re-drives a deployed stack's
 * effects dead letters, in order, as `ratchet redrive` does for Ratchet on one
 * machine (app/effects/redrive.ts decides; this file only reaches the stack).
 *
 *   ratchet-aws redrive --stack Ratchet --list                  # what is dead-lettered
 *   ratchet-aws redrive --stack Ratchet                         # re-queue every dead letter
 *   ratchet-aws redrive --stack Ratchet --name batches/123      # only this operation
 *   ratchet-aws redrive --stack Ratchet --skip batches/123#2    # drop this one, re-queue the rest
 *
 * AWS credentials and region come from the environment, as for `cdk deploy`.
 */
import { CloudFormationClient, DescribeStacksCommand } from '@aws-sdk/client-cloudformation';
import { GetQueueAttributesCommand, SendMessageCommand, SQSClient, StartMessageMoveTaskCommand } from '@aws-sdk/client-sqs';
import { failure, parseCommandLine, usageError } from '../../app/command-line.ts';
import { deadLetterLines, type RedriveOptions, redrive, redriveReportLines } from '../../app/effects/redrive.ts';
import { deadLettersTable, openDynamoDb } from '../../engines/dynamodb/index.ts';
import { effectsGroupOf } from '../../engines/dynamodb/tables.ts';
import type { RedrivenBody } from '../../lambda/effects/process.ts';
import { REDRIVEN_ATTRIBUTE } from '../../lambda/effects/sqs-retry-scheduler.ts';

const command = {
  name: 'ratchet-aws redrive',
  usage: `usage: ratchet-aws redrive --stack NAME [--list] [--name OPERATION] [--skip NAME#VERSION]
  --stack NAME         the deployed stack (required; AWS credentials and region from the environment)
  --list               what is dead-lettered, nothing re-driven
  --name OPERATION     only this operation's dead letters
  --skip NAME#VERSION  drop this one (never to be delivered), re-queue the rest`,
  options: { stack: { type: 'string' }, list: { type: 'boolean' }, name: { type: 'string' }, skip: { type: 'string' } },
} as const;

async function main(): Promise<void> {
  const { values } = parseCommandLine(command);
  const stackName = values.stack;
  if (!stackName) usageError(command, '--stack NAME is required');
  const options: RedriveOptions = { ...(values.name && { name: values.name }), ...(values.skip && { skip: values.skip }) };
  const { Stacks } = await new CloudFormationClient({}).send(new DescribeStacksCommand({ StackName: stackName }));
  const output = (key: string) => {
    const value = Stacks?.[0]?.Outputs?.find((o) => o.OutputKey === key)?.OutputValue;
    if (!value) throw new Error(`stack ${stackName} has no output ${key}`);
    return value;
  };
  const { deadLetters } = openDynamoDb({ tables: { deadLetters: deadLettersTable(output('EffectsDeadLetterTable')) } });
  if (values.list) {
    for (const line of deadLetterLines(await deadLetters.list(), await deadLetters.listUndecodable())) console.log(line);
    return;
  }
  const sqs = new SQSClient({});
  const queueUrl = output('EffectsQueueUrl');
  const result = await redrive(
    deadLetters,
    async (letter) => {
      await sqs.send(
        new SendMessageCommand({
          QueueUrl: queueUrl,
          // The transition itself (a letter of 0.1 still has the stream record it was sent from).
          MessageBody: letter.record ?? JSON.stringify({ redriven: letter.transition } satisfies RedrivenBody),
          MessageGroupId: effectsGroupOf(letter.name),
          // A new id: the queue may still remember the original within its 5-minute deduplication window.
          MessageDeduplicationId: `redrive-${effectsGroupOf(letter.idempotencyKey)}-${Date.now()}`,
          MessageAttributes: { [REDRIVEN_ATTRIBUTE]: { DataType: 'String', StringValue: 'true' } },
        }),
      );
    },
    options,
  );
  for (const line of redriveReportLines(result)) console.log(line);
  // What SQS itself dead-lettered (a handler that kept crashing) goes back with SQS's own redrive.
  const { Attributes } = await sqs.send(
    new GetQueueAttributesCommand({
      QueueUrl: output('EffectsDeadLetterQueueUrl'),
      AttributeNames: ['QueueArn', 'ApproximateNumberOfMessages'],
    }),
  );
  if (Number(Attributes?.ApproximateNumberOfMessages ?? 0) > 0) {
    await sqs.send(new StartMessageMoveTaskCommand({ SourceArn: Attributes?.QueueArn }));
    console.log(`moving ${Attributes?.ApproximateNumberOfMessages} message(s) from the SQS dead-letter queue back to the effects queue`);
  }
}

try {
  await main();
} catch (error) {
  failure(command, (error as Error).message);
}
