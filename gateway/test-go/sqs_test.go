package gatewaytest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
)

var names atomic.Int64

func name(prefix string) string { return fmt.Sprintf("%s-%d", prefix, names.Add(1)) }

// client: the SDK pointed at the gateway as the README does, with no retries, so that an
// error is seen as the gateway sent it.
func client(t *testing.T) *sqs.Client {
	t.Helper()
	cfg, err := config.LoadDefaultConfig(context.Background(), config.WithRegion("us-east-1"),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("local", "local", "")),
		config.WithRetryMaxAttempts(1))
	if err != nil {
		t.Fatal(err)
	}
	return sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.BaseEndpoint = aws.String(endpoint) })
}

// must(c.Action(...)).of(t): the reply, or the test fails with the error.
func must[T any](v T, err error) result[T] { return result[T]{v, err} }

type result[T any] struct {
	v   T
	err error
}

func (r result[T]) of(t *testing.T) T {
	t.Helper()
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.v
}

func code(err error) string {
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	return ""
}

func createQueue(t *testing.T, c *sqs.Client, q string, attrs map[string]string) string {
	t.Helper()
	return *must(c.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String(q), Attributes: attrs})).of(t).QueueUrl
}

func receive(t *testing.T, c *sqs.Client, url string, max, visibility int32, wait int32) []types.Message {
	t.Helper()
	return must(c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(url), MaxNumberOfMessages: max, VisibilityTimeout: visibility, WaitTimeSeconds: wait,
		MessageAttributeNames:       []string{"All"},
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
	})).of(t).Messages
}

func queueAttrs(t *testing.T, c *sqs.Client, url string) map[string]string {
	t.Helper()
	return must(c.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll}})).of(t).Attributes
}

// The README's example as it is written there (between the README markers).
func TestReadmeExample(t *testing.T) {
	ctx := context.Background()
	// README:go begin
	cfg, _ := config.LoadDefaultConfig(ctx, config.WithRegion("us-east-1"),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("local", "local", "")))
	client := sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.BaseEndpoint = aws.String(endpoint) })
	q, _ := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("orders")})
	client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("order 42")})
	out, _ := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, WaitTimeSeconds: 20})
	for _, m := range out.Messages {
		client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: q.QueueUrl, ReceiptHandle: m.ReceiptHandle})
	}
	// README:go end
	if len(out.Messages) != 1 || *out.Messages[0].Body != "order 42" {
		t.Fatalf("received %+v", out.Messages)
	}
	a := queueAttrs(t, client, *q.QueueUrl)
	if a["ApproximateNumberOfMessages"] != "0" || a["ApproximateNumberOfMessagesNotVisible"] != "0" {
		t.Fatalf("not deleted: %v", a)
	}
	if !readmeHas(t, "go", "sqs_test.go") {
		t.Fatal("docs/gateway.md's Go example is not the one tested here")
	}
}

func TestSendReceiveDeleteWithAttributes(t *testing.T) {
	c, ctx := client(t), context.Background()
	url := createQueue(t, c, name("basic"), nil)
	attrs := map[string]types.MessageAttributeValue{
		"tier": {DataType: aws.String("String"), StringValue: aws.String("gold ü")},
		"n":    {DataType: aws.String("Number"), StringValue: aws.String("-1.5")},
		"raw":  {DataType: aws.String("Binary"), BinaryValue: []byte{0, 0xfe, 7}},
	}
	body := "hello 𝄞 \t\n"
	sent := must(c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(body),
		MessageAttributes: attrs})).of(t)
	got := receive(t, c, url, 10, 30, 20)
	if len(got) != 1 {
		t.Fatalf("received %d messages", len(got))
	}
	m := got[0]
	if *m.Body != body || *m.MessageId != *sent.MessageId || *m.MD5OfBody != *sent.MD5OfMessageBody ||
		*m.MD5OfMessageAttributes != *sent.MD5OfMessageAttributes {
		t.Fatalf("received %+v after %+v", m, sent)
	}
	if *m.MessageAttributes["tier"].StringValue != "gold ü" || *m.MessageAttributes["n"].StringValue != "-1.5" ||
		string(m.MessageAttributes["raw"].BinaryValue) != "\x00\xfe\x07" {
		t.Fatalf("attributes %+v", m.MessageAttributes)
	}
	if m.Attributes["ApproximateReceiveCount"] != "1" || m.Attributes["SentTimestamp"] == "" {
		t.Fatalf("system attributes %v", m.Attributes)
	}
	if a := queueAttrs(t, c, url); a["ApproximateNumberOfMessagesNotVisible"] != "1" {
		t.Fatalf("in flight: %v", a)
	}
	must(c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle})).of(t)
	if a := queueAttrs(t, c, url); a["ApproximateNumberOfMessagesNotVisible"] != "0" || a["ApproximateNumberOfMessages"] != "0" {
		t.Fatalf("after delete: %v", a)
	}
	_, err := c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: aws.String("garbled")})
	var invalid *types.ReceiptHandleIsInvalid
	if !errors.As(err, &invalid) {
		t.Fatalf("garbled handle: %v", err)
	}
	_, err = c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(endpoint + "/000000000000/nope"), MessageBody: aws.String("x")})
	var missing *types.QueueDoesNotExist
	if !errors.As(err, &missing) {
		t.Fatalf("unknown queue: %v", err)
	}
}

func TestBatches(t *testing.T) {
	c, ctx := client(t), context.Background()
	url := createQueue(t, c, name("batch"), nil)
	var entries []types.SendMessageBatchRequestEntry
	for i := 0; i < 10; i++ {
		body := fmt.Sprintf("m%d", i)
		if i == 7 {
			body = "bad \x01"
		}
		entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), MessageBody: aws.String(body),
			MessageAttributes: map[string]types.MessageAttributeValue{"i": {DataType: aws.String("Number"), StringValue: aws.String(strconv.Itoa(i))}}})
	}
	sent := must(c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})).of(t)
	if len(sent.Successful) != 9 || len(sent.Failed) != 1 || *sent.Failed[0].Id != "7" || *sent.Failed[0].Code != "InvalidMessageContents" {
		t.Fatalf("batch send: %+v", sent)
	}
	_, err := c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: []types.SendMessageBatchRequestEntry{
		{Id: aws.String("x"), MessageBody: aws.String("a")}, {Id: aws.String("x"), MessageBody: aws.String("b")}}})
	var notDistinct *types.BatchEntryIdsNotDistinct
	if !errors.As(err, &notDistinct) {
		t.Fatalf("repeated ids: %v", err)
	}
	var got []types.Message
	for deadline := time.Now().Add(30 * time.Second); len(got) < 9 && time.Now().Before(deadline); {
		got = append(got, receive(t, c, url, 10, 30, 20)...)
	}
	var bodies []string
	for _, m := range got {
		bodies = append(bodies, *m.Body)
	}
	sort.Strings(bodies)
	if fmt.Sprint(bodies) != "[m0 m1 m2 m3 m4 m5 m6 m8 m9]" {
		t.Fatalf("received %v", bodies)
	}
	vis := must(c.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(url),
		Entries: []types.ChangeMessageVisibilityBatchRequestEntry{
			{Id: aws.String("a"), ReceiptHandle: got[0].ReceiptHandle, VisibilityTimeout: 0},
			{Id: aws.String("b"), ReceiptHandle: aws.String("garbled"), VisibilityTimeout: 0}}})).of(t)
	if len(vis.Successful) != 1 || len(vis.Failed) != 1 || *vis.Failed[0].Code != "ReceiptHandleIsInvalid" {
		t.Fatalf("visibility batch: %+v", vis)
	}
	again := receive(t, c, url, 10, 30, 20)
	if len(again) != 1 || *again[0].MessageId != *got[0].MessageId || again[0].Attributes["ApproximateReceiveCount"] != "2" {
		t.Fatalf("made visible again: %+v", again)
	}
	got[0] = again[0]
	var del []types.DeleteMessageBatchRequestEntry
	for i, m := range got {
		del = append(del, types.DeleteMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), ReceiptHandle: m.ReceiptHandle})
	}
	del = append(del, types.DeleteMessageBatchRequestEntry{Id: aws.String("bad"), ReceiptHandle: aws.String("garbled")})
	deleted := must(c.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(url), Entries: del})).of(t)
	if len(deleted.Successful) != 9 || len(deleted.Failed) != 1 || *deleted.Failed[0].Id != "bad" {
		t.Fatalf("batch delete: %+v", deleted)
	}
	if a := queueAttrs(t, c, url); a["ApproximateNumberOfMessagesNotVisible"] != "0" || a["ApproximateNumberOfMessages"] != "0" {
		t.Fatalf("after delete: %v", a)
	}
}

func TestVisibility(t *testing.T) {
	c, ctx := client(t), context.Background()
	url := createQueue(t, c, name("vis"), map[string]string{"VisibilityTimeout": "1"})
	must(c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String("v")})).of(t)
	// The queue's visibility timeout (1 s) runs out: the same message again, counted twice.
	first := receive(t, c, url, 1, 0, 20)
	if len(first) != 1 {
		t.Fatal("nothing received")
	}
	second := receive(t, c, url, 1, 60, 20)
	if len(second) != 1 || *second[0].MessageId != *first[0].MessageId || second[0].Attributes["ApproximateReceiveCount"] != "2" {
		t.Fatalf("redelivery: %+v", second)
	}
	// Its lease is 60 s now: nothing for a short poll; ChangeMessageVisibility 0 frees it.
	if got := receive(t, c, url, 1, 30, 1); len(got) != 0 {
		t.Fatalf("received while in flight: %+v", got)
	}
	must(c.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(url),
		ReceiptHandle: second[0].ReceiptHandle, VisibilityTimeout: 0})).of(t)
	third := receive(t, c, url, 1, 30, 20)
	if len(third) != 1 || third[0].Attributes["ApproximateReceiveCount"] != "3" {
		t.Fatalf("after visibility 0: %+v", third)
	}
	// The ended deliveries' handles delete nothing and are no error (as SQS).
	must(c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: first[0].ReceiptHandle})).of(t)
	if a := queueAttrs(t, c, url); a["ApproximateNumberOfMessagesNotVisible"] != "1" {
		t.Fatalf("a stale handle deleted the message: %v", a)
	}
	_, err := c.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(url),
		ReceiptHandle: third[0].ReceiptHandle, VisibilityTimeout: 43201})
	if code(err) != "InvalidParameterValue" {
		t.Fatalf("visibility over 12 h: %v", err)
	}
}

func TestFifo(t *testing.T) {
	c, ctx := client(t), context.Background()
	url := createQueue(t, c, name("fifo")+".fifo", map[string]string{"FifoQueue": "true"})
	var seqs []string
	for i := 0; i < 3; i++ {
		for _, g := range []string{"A", "B"} {
			r := must(c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(fmt.Sprintf("%s%d", g, i)),
				MessageGroupId: aws.String(g), MessageDeduplicationId: aws.String(fmt.Sprintf("%s-%d", g, i))})).of(t)
			seqs = append(seqs, *r.SequenceNumber)
		}
	}
	if !sort.StringsAreSorted(seqs) {
		t.Fatalf("sequence numbers %v", seqs)
	}
	// The same deduplication id again: accepted, not delivered twice.
	must(c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String("A0 again"),
		MessageGroupId: aws.String("A"), MessageDeduplicationId: aws.String("A-0")})).of(t)
	batch := must(c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: []types.SendMessageBatchRequestEntry{
		{Id: aws.String("1"), MessageBody: aws.String("C0"), MessageGroupId: aws.String("C"), MessageDeduplicationId: aws.String("c0")},
		{Id: aws.String("2"), MessageBody: aws.String("C1"), MessageGroupId: aws.String("C"), MessageDeduplicationId: aws.String("c1")},
		{Id: aws.String("3"), MessageBody: aws.String("no group"), MessageDeduplicationId: aws.String("x")}}})).of(t)
	if len(batch.Successful) != 2 || len(batch.Failed) != 1 || *batch.Failed[0].Id != "3" {
		t.Fatalf("fifo batch: %+v", batch)
	}
	// One message per group in flight: the heads of A, B and C.
	first := receive(t, c, url, 10, 30, 20)
	heads := map[string]bool{}
	for _, m := range first {
		heads[*m.Body] = true
	}
	if len(first) != 3 || !heads["A0"] || !heads["B0"] || !heads["C0"] {
		t.Fatalf("first receive: %v", heads)
	}
	if got := receive(t, c, url, 10, 30, 1); len(got) != 0 {
		t.Fatalf("received with every group in flight: %d", len(got))
	}
	order := map[string][]string{}
	pending := first
	for round := 0; round < 20; round++ {
		for _, m := range pending {
			g := m.Attributes["MessageGroupId"]
			order[g] = append(order[g], *m.Body)
			must(c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle})).of(t)
		}
		if len(order["A"])+len(order["B"])+len(order["C"]) == 8 {
			break
		}
		pending = receive(t, c, url, 10, 30, 5)
	}
	if fmt.Sprint(order) != "map[A:[A0 A1 A2] B:[B0 B1 B2] C:[C0 C1]]" {
		t.Fatalf("per-group order %v", order)
	}
	_, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String("x"),
		MessageGroupId: aws.String("A"), DelaySeconds: 5})
	if code(err) != "InvalidParameterValue" {
		t.Fatalf("per-message delay on FIFO: %v", err)
	}
}

func TestLongPollWakesOnSend(t *testing.T) {
	c, ctx := client(t), context.Background()
	url := createQueue(t, c, name("poll"), nil)
	done := make(chan []types.Message, 1)
	t0 := time.Now()
	go func() {
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), WaitTimeSeconds: 20})
		if err != nil {
			done <- nil
			return
		}
		done <- out.Messages
	}()
	time.Sleep(time.Second)
	must(c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String("wake")})).of(t)
	got := <-done
	if len(got) != 1 || *got[0].Body != "wake" {
		t.Fatalf("long poll got %+v", got)
	}
	if took := time.Since(t0); took > 15*time.Second {
		t.Fatalf("the long poll took %v: not woken by the send", took)
	}
}
