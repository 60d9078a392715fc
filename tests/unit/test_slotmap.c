/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Slot maps from CLUSTER SHARDS and CLUSTER SLOTS replies, made by hiredis's
 * own reader from RESP text: two replies captured from a real 3-primary
 * redis-server 7.0.15 cluster (one replica), hand-written variants (several
 * ranges per primary, endpoints, TLS ports, failed primaries) and malformed
 * ones, which must each be DLOCK_EPROTO with a message, never a crash.
 * MOVED patches, and every allocation failing in turn.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "dlock/errors.h"
#include "core/base/error.h"
#include "core/topology/slotmap.h"
#include "support.h"

/* CLUSTER SHARDS and CLUSTER SLOTS of one redis-server 7.0.15 node (RESP2). */
static const char real_shards[] =
		"*3\r\n*4\r\n$5\r\nslots\r\n*2\r\n:10923\r\n:16383\r\n$5\r\nnodes\r\n*1\r\n"
		"*14\r\n$2\r\nid\r\n$40\r\nc31c3473eedaf80e224c4d95905762257511e3a0\r\n$4\r\n"
		"port\r\n:47103\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n"
		"127.0.0.1\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$18\r\nreplication-offset\r\n:0\r\n"
		"$6\r\nhealth\r\n$6\r\nonline\r\n*4\r\n$5\r\nslots\r\n*2\r\n:0\r\n:5460\r\n$5\r\n"
		"nodes\r\n*2\r\n*14\r\n$2\r\nid\r\n$40\r\n"
		"cbf0417ec4a0672dcc24a4ffac3aed29fee895cf\r\n$4\r\nport\r\n:47101\r\n$2\r\nip\r\n"
		"$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n$4\r\nrole\r\n$6\r\n"
		"master\r\n$18\r\nreplication-offset\r\n:14\r\n$6\r\nhealth\r\n$6\r\nonline\r\n"
		"*14\r\n$2\r\nid\r\n$40\r\n883053c76f6fc414f3bd9539c946e1b2d56ea579\r\n$4\r\n"
		"port\r\n:47104\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n"
		"127.0.0.1\r\n$4\r\nrole\r\n$7\r\nreplica\r\n$18\r\nreplication-offset\r\n:14\r\n"
		"$6\r\nhealth\r\n$6\r\nonline\r\n*4\r\n$5\r\nslots\r\n*2\r\n:5461\r\n:10922\r\n"
		"$5\r\nnodes\r\n*1\r\n*14\r\n$2\r\nid\r\n$40\r\n"
		"374bbd99271dedb3f5cc46335f7ca773599b3c61\r\n$4\r\nport\r\n:47102\r\n$2\r\nip\r\n"
		"$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n$4\r\nrole\r\n$6\r\n"
		"master\r\n$18\r\nreplication-offset\r\n:0\r\n$6\r\nhealth\r\n$6\r\nonline\r\n";

static const char real_slots[] =
		"*3\r\n*4\r\n:0\r\n:5460\r\n*4\r\n$9\r\n127.0.0.1\r\n:47101\r\n$40\r\n"
		"cbf0417ec4a0672dcc24a4ffac3aed29fee895cf\r\n*0\r\n*4\r\n$9\r\n127.0.0.1\r\n"
		":47104\r\n$40\r\n883053c76f6fc414f3bd9539c946e1b2d56ea579\r\n*0\r\n*3\r\n"
		":5461\r\n:10922\r\n*4\r\n$9\r\n127.0.0.1\r\n:47102\r\n$40\r\n"
		"374bbd99271dedb3f5cc46335f7ca773599b3c61\r\n*0\r\n*3\r\n:10923\r\n:16383\r\n"
		"*4\r\n$9\r\n127.0.0.1\r\n:47103\r\n$40\r\n"
		"c31c3473eedaf80e224c4d95905762257511e3a0\r\n*0\r\n";

#define ID_47101 "cbf0417ec4a0672dcc24a4ffac3aed29fee895cf"
#define ID_47104 "883053c76f6fc414f3bd9539c946e1b2d56ea579"

/* ---- replies from RESP text, or from a short notation -------------------- */

static redisReply *resp(const char *text, size_t len)
{
	redisReader *rd = redisReaderCreate();
	cr_assert_not_null(rd);
	cr_assert_eq(redisReaderFeed(rd, text, len), REDIS_OK);
	void *r = NULL;
	cr_assert_eq(redisReaderGetReply(rd, &r), REDIS_OK, "reader: %s", rd->errstr);
	cr_assert_not_null(r, "incomplete RESP: %.*s", (int)len, text);
	redisReaderFree(rd);
	return r;
}

typedef struct buf {
	char *p;
	size_t len, cap;
} buf;

static void put(buf *b, const char *s, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		b->cap = (b->len + n + 1) * 2;
		b->p = realloc(b->p, b->cap);
		cr_assert_not_null(b->p);
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

/*
 * One element of the notation at *s into RESP: [ ... ] an array, #N an
 * integer, ~ a nil, '' an empty string, any other word a bulk string.
 */
static void notation(const char **s, buf *out)
{
	while (**s == ' ' || **s == '\n')
		(*s)++;
	char head[64];
	if (**s == '[') {
		(*s)++;
		buf kids = { 0 };
		int n = 0;
		for (;;) {
			while (**s == ' ' || **s == '\n')
				(*s)++;
			cr_assert(**s != '\0', "unterminated [");
			if (**s == ']')
				break;
			notation(s, &kids);
			n++;
		}
		(*s)++;
		int h = snprintf(head, sizeof head, "*%d\r\n", n);
		put(out, head, (size_t)h);
		if (kids.len)
			put(out, kids.p, kids.len);
		free(kids.p);
		return;
	}
	const char *w = *s;
	while (**s && **s != ' ' && **s != '\n' && **s != ']' && **s != '[')
		(*s)++;
	size_t n = (size_t)(*s - w);
	int h;
	if (n > 0 && w[0] == '#') {
		h = snprintf(head, sizeof head, ":%.*s\r\n", (int)n - 1, w + 1);
		put(out, head, (size_t)h);
	} else if (n == 1 && w[0] == '~') {
		put(out, "$-1\r\n", 5);
	} else {
		if (n == 2 && memcmp(w, "''", 2) == 0)
			n = 0;
		h = snprintf(head, sizeof head, "$%zu\r\n", n);
		put(out, head, (size_t)h);
		put(out, w, n);
		put(out, "\r\n", 2);
	}
}

static redisReply *reply(const char *text)
{
	buf b = { 0 };
	notation(&text, &b);
	redisReply *r = resp(b.p, b.len);
	free(b.p);
	return r;
}

static dlock__slotmap *shards_ok(const char *text, const char *asked, int tls)
{
	redisReply *r = reply(text);
	dlock__slotmap *m = NULL;
	int rc = dlock__slotmap_from_shards(&m, r, asked, tls);
	cr_assert_eq(rc, 0, "rc %d: %s\nfor %s", rc, dlock__errmsg_thread(), text);
	freeReplyObject(r);
	return m;
}

static dlock__slotmap *slots_ok(const char *text, const char *asked)
{
	redisReply *r = reply(text);
	dlock__slotmap *m = NULL;
	int rc = dlock__slotmap_from_slots(&m, r, asked);
	cr_assert_eq(rc, 0, "rc %d: %s\nfor %s", rc, dlock__errmsg_thread(), text);
	freeReplyObject(r);
	return m;
}

/* The primary serving slot: its address, or "-" for none. */
static const char *owner(const dlock__slotmap *m, unsigned slot, char *out, size_t len)
{
	int i = dlock__slotmap_primary(m, (uint16_t)slot);
	if (i < 0)
		snprintf(out, len, "-");
	else
		snprintf(out, len, "%s:%d", dlock__slotmap_host(m, i), dlock__slotmap_port(m, i));
	return out;
}

static void expect_owner(const dlock__slotmap *m, unsigned slot, const char *want)
{
	char got[300];
	cr_assert_str_eq(owner(m, slot, got, sizeof got), want, "slot %u", slot);
}

/* The real cluster: 0-5460 on 47101 (replica 47104), 5461-10922 on 47102, the rest on 47103. */
static void expect_real_cluster(const dlock__slotmap *m)
{
	cr_assert_eq(dlock__slotmap_count(m), 3);
	cr_assert_eq(dlock__slotmap_covered(m), 16384);
	expect_owner(m, 0, "127.0.0.1:47101");
	expect_owner(m, 5460, "127.0.0.1:47101");
	expect_owner(m, 5461, "127.0.0.1:47102");
	expect_owner(m, 10922, "127.0.0.1:47102");
	expect_owner(m, 10923, "127.0.0.1:47103");
	expect_owner(m, 16383, "127.0.0.1:47103");
	int p = dlock__slotmap_find(m, "127.0.0.1", 47101);
	cr_assert_geq(p, 0);
	cr_assert_eq(dlock__slotmap_served(m, p), 5461);
	cr_assert_str_eq(dlock__slotmap_node(m, p)->id, ID_47101);
	cr_assert_eq(dlock__slotmap_replica_count(m, p), 1);
	const dlock__slotnode *r = dlock__slotmap_replica(m, p, 0);
	cr_assert_str_eq(r->host, "127.0.0.1");
	cr_assert_eq(r->port, 47104);
	cr_assert_str_eq(r->id, ID_47104);
	cr_assert_eq(r->online, 1);
	cr_assert_null(dlock__slotmap_replica(m, p, 1));
	int q = dlock__slotmap_find(m, "127.0.0.1", 47102);
	cr_assert_eq(dlock__slotmap_replica_count(m, q), 0);
	cr_assert_eq(dlock__slotmap_served(m, q), 5462);
}

Test(slotmap, real_cluster_shards, .timeout = 10)
{
	redisReply *r = resp(real_shards, sizeof real_shards - 1);
	dlock__slotmap *m;
	cr_assert_eq(dlock__slotmap_from_shards(&m, r, "127.0.0.1", 0), 0, "%s",
			dlock__errmsg_thread());
	expect_real_cluster(m);
	dlock__slotmap_free(m);
	freeReplyObject(r);
}

Test(slotmap, real_cluster_slots, .timeout = 10)
{
	redisReply *r = resp(real_slots, sizeof real_slots - 1);
	dlock__slotmap *m;
	cr_assert_eq(dlock__slotmap_from_slots(&m, r, NULL), 0, "%s", dlock__errmsg_thread());
	expect_real_cluster(m);
	dlock__slotmap_free(m);
	freeReplyObject(r);
}

/* Two ranges on one primary, a primary without slots, a failed replica. */
static const char shards_ranges[] =
		"[[slots [#0 #99 #200 #299] nodes ["
		"[id aaa port #7001 ip 10.0.0.1 endpoint 10.0.0.1 role master health online]"
		"[id bbb port #7002 ip 10.0.0.2 endpoint 10.0.0.2 role replica health failed]]]"
		"[slots [#100 #199] nodes ["
		"[id ccc port #7003 ip 10.0.0.3 endpoint 10.0.0.3 role master health online]]]"
		"[slots [] nodes ["
		"[id ddd port #7004 ip 10.0.0.4 endpoint 10.0.0.4 role master health online]]]]";

static const char slots_ranges[] = "[[#0 #99 [10.0.0.1 #7001 aaa []] [10.0.0.2 #7002 bbb []]]"
				   "[#100 #199 [10.0.0.3 #7003 ccc []]]"
				   "[#200 #299 [10.0.0.1 #7001 aaa []] [10.0.0.2 #7002 bbb []]]]";

Test(slotmap, several_ranges_one_primary, .timeout = 10)
{
	dlock__slotmap *a = shards_ok(shards_ranges, NULL, 0);
	dlock__slotmap *b = slots_ok(slots_ranges, NULL);
	cr_assert_eq(dlock__slotmap_count(a), 2, "a shard without slots is left out");
	cr_assert_eq(dlock__slotmap_count(b), 2);
	for (unsigned s = 0; s < 16384; s++) {
		char x[300], y[300];
		cr_assert_str_eq(owner(a, s, x, sizeof x), owner(b, s, y, sizeof y), "slot %u", s);
	}
	expect_owner(a, 0, "10.0.0.1:7001");
	expect_owner(a, 150, "10.0.0.3:7003");
	expect_owner(a, 299, "10.0.0.1:7001");
	expect_owner(a, 300, "-");
	cr_assert_eq(dlock__slotmap_covered(a), 300);
	cr_assert_eq(dlock__slotmap_served(a, 0), 200);
	cr_assert_eq(dlock__slotmap_replica_count(a, 0), 1);
	cr_assert_eq(dlock__slotmap_replica(a, 0, 0)->online, 0, "health failed");
	cr_assert_eq(dlock__slotmap_replica_count(b, 0), 1, "one replica, listed twice");
	cr_assert_str_eq(dlock__slotmap_node(b, 1)->id, "ccc");
	cr_assert_eq(dlock__slotmap_primary(a, 16384), -1, "past the last slot");
	cr_assert_eq(dlock__slotmap_primary(NULL, 0), -1);
	cr_assert_null(dlock__slotmap_node(a, 2));
	cr_assert_null(dlock__slotmap_node(a, -1));
	cr_assert_null(dlock__slotmap_host(a, 5));
	cr_assert_eq(dlock__slotmap_port(a, 5), -1);
	dlock__slotmap_free(a);
	dlock__slotmap_free(b);
}

/* One shard serving every slot, its primary's endpoint and ip as given. */
static dlock__slotmap *one_shard(const char *endpoint, const char *ip, const char *asked)
{
	char text[512];
	snprintf(text, sizeof text,
			"[[slots [#0 #16383] nodes [[id a port #7000 %s%s%s%s role master "
			"health online]]]]",
			ip ? "ip " : "", ip ? ip : "", endpoint ? " endpoint " : "",
			endpoint ? endpoint : "");
	return shards_ok(text, asked, 0);
}

static void expect_host(dlock__slotmap *m, const char *want)
{
	cr_assert_str_eq(dlock__slotmap_host(m, 0), want);
	dlock__slotmap_free(m);
}

Test(slotmap, shard_endpoints, .timeout = 10)
{
	expect_host(one_shard("node-a.example", "10.0.0.1", "seed"), "node-a.example");
	/* NULL or empty: the host that was asked, else the ip. */
	expect_host(one_shard("~", "10.0.0.1", "seed"), "seed");
	expect_host(one_shard("''", "10.0.0.1", "seed"), "seed");
	expect_host(one_shard("~", "10.0.0.1", NULL), "10.0.0.1");
	/* "?" (unknown hostname): the ip, never the asked host. */
	expect_host(one_shard("?", "10.0.0.1", "seed"), "10.0.0.1");
	/* No endpoint field: the ip, else the asked host. */
	expect_host(one_shard(NULL, "10.0.0.1", "seed"), "10.0.0.1");
	expect_host(one_shard(NULL, NULL, "seed"), "seed");
}

Test(slotmap, slots_endpoints, .timeout = 10)
{
	dlock__slotmap *m = slots_ok("[[#0 #9 [~ #7000 a] [? #7001 b] ['' #7002 c]]"
				     "[#10 #19 [host-b #7003]]]",
			"seed");
	cr_assert_str_eq(dlock__slotmap_host(m, 0), "seed");
	cr_assert_eq(dlock__slotmap_replica_count(m, 0), 1, "the unknown one is left out");
	cr_assert_str_eq(dlock__slotmap_replica(m, 0, 0)->host, "seed");
	cr_assert_eq(dlock__slotmap_replica(m, 0, 0)->port, 7002);
	cr_assert_str_eq(dlock__slotmap_host(m, 1), "host-b");
	cr_assert_null(dlock__slotmap_node(m, 1)->id, "Redis 3.0 gave no id");
	dlock__slotmap_free(m);
}

Test(slotmap, tls_ports, .timeout = 10)
{
	static const char text[] = "[[slots [#0 #16383] nodes ["
				   "[id a port #7000 tls-port #8000 ip h1 endpoint h1 role master]"
				   "[id b tls-port #8001 ip h2 endpoint h2 role replica]"
				   "[id c port #7002 ip h3 endpoint h3 role replica]]]]";
	dlock__slotmap *m = shards_ok(text, NULL, 1);
	cr_assert_eq(dlock__slotmap_port(m, 0), 8000);
	cr_assert_eq(dlock__slotmap_replica_count(m, 0), 1,
			"a replica without tls-port is left out");
	cr_assert_eq(dlock__slotmap_replica(m, 0, 0)->port, 8001);
	dlock__slotmap_free(m);
	m = shards_ok(text, NULL, 0);
	cr_assert_eq(dlock__slotmap_port(m, 0), 7000);
	cr_assert_eq(dlock__slotmap_replica_count(m, 0), 1);
	cr_assert_eq(dlock__slotmap_replica(m, 0, 0)->port, 7002);
	dlock__slotmap_free(m);
}

Test(slotmap, the_online_primary_of_a_shard, .timeout = 10)
{
	/* After a failover a shard may list its failed old primary first. */
	dlock__slotmap *m = shards_ok(
			"[[slots [#0 #16383] nodes ["
			"[id old port #7000 ip h endpoint h role master health failed]"
			"[id new port #7001 ip h endpoint h role master health online]"
			"[id r port #7002 ip h endpoint h role replica health loading]]]]",
			NULL, 0);
	cr_assert_eq(dlock__slotmap_count(m), 1);
	cr_assert_str_eq(dlock__slotmap_node(m, 0)->id, "new");
	cr_assert_eq(dlock__slotmap_replica_count(m, 0), 1, "the other primary is no replica");
	cr_assert_eq(dlock__slotmap_replica(m, 0, 0)->online, 0);
	dlock__slotmap_free(m);
	/* No primary online: the first one still serves in the map. */
	m = shards_ok("[[slots [#5 #5] nodes [[id x port #7000 ip h role replica]"
		      "[id y port #7001 ip h role master health failed]]]]",
			NULL, 0);
	cr_assert_str_eq(dlock__slotmap_node(m, 0)->id, "y");
	expect_owner(m, 5, "h:7001");
	dlock__slotmap_free(m);
}

Test(slotmap, empty_and_error_replies, .timeout = 10)
{
	dlock__slotmap *m = shards_ok("[]", NULL, 0);
	cr_assert_eq(dlock__slotmap_count(m), 0);
	cr_assert_eq(dlock__slotmap_covered(m), 0);
	dlock__slotmap_free(m);
	m = slots_ok("[]", NULL);
	cr_assert_eq(dlock__slotmap_covered(m), 0);
	dlock__slotmap_free(m);

	static const char err[] = "-ERR This instance has cluster support disabled\r\n";
	redisReply *r = resp(err, sizeof err - 1);
	m = (dlock__slotmap *)1;
	cr_assert_eq(dlock__slotmap_from_shards(&m, r, NULL, 0), DLOCK_ESERVER);
	cr_assert_null(m);
	cr_assert(strstr(dlock__errmsg_thread(), "cluster support disabled") != NULL);
	cr_assert_eq(dlock__slotmap_from_slots(&m, r, NULL), DLOCK_ESERVER);
	freeReplyObject(r);
	cr_assert_eq(dlock__slotmap_from_shards(&m, NULL, NULL, 0), DLOCK_EINVAL);
	cr_assert_eq(dlock__slotmap_from_slots(NULL, NULL, NULL), DLOCK_EINVAL);
	dlock__slotmap_free(NULL);
}

#define NODE_M "[id a port #7000 ip h role master]"

/* CLUSTER SHARDS replies that are wrong somewhere: each DLOCK_EPROTO. */
static const char *const bad_shards[] = {
	"#5",
	"OK",
	"[#1]",
	"[[slots]]",                                /* odd field list */
	"[[#1 #2]]",                                /* names that are not strings */
	"[[nodes [" NODE_M "]]]",                   /* no slots */
	"[[slots #5 nodes [" NODE_M "]]]",          /* slots not a list */
	"[[slots [#0] nodes [" NODE_M "]]]",        /* odd slot list */
	"[[slots [#0 #16384] nodes [" NODE_M "]]]", /* out of range */
	"[[slots [#-1 #5] nodes [" NODE_M "]]]",
	"[[slots [#9 #5] nodes [" NODE_M "]]]", /* start after end */
	"[[slots [0 5] nodes [" NODE_M "]]]",   /* slots as strings */
	"[[slots [#0 #5]]]",                    /* no nodes */
	"[[slots [#0 #5] nodes " NODE_M "]]",   /* nodes not a list of lists */
	"[[slots [#0 #5] nodes []]]",           /* slots and no node */
	"[[slots [#0 #5] nodes [[id a port #7000 ip h role replica]]]]", /* no primary */
	"[[slots [#0 #5] nodes [[id a port #7000 ip h]]]]",              /* no role */
	"[[slots [#0 #5] nodes [[id a port #7000 ip h role leader]]]]",
	"[[slots [#0 #5] nodes [[id a port 7000 ip h role master]]]]", /* port a string */
	"[[slots [#0 #5] nodes [[id a port #70000 ip h role master]]]]",
	"[[slots [#0 #5] nodes [[id a port #-1 ip h role master]]]]",
	"[[slots [#0 #5] nodes [[id a ip h role master]]]]", /* no port */
	"[[slots [#0 #5] nodes [[id a port #0 ip h role master]]]]",
	"[[slots [#0 #5] nodes [[id #1 port #7000 ip h role master]]]]", /* id an integer */
	"[[slots [#0 #5] nodes [[id '' port #7000 ip h role master]]]]", /* empty id */
	"[[slots [#0 #5] nodes [[id a port #7000 ip [] role master]]]]",
	"[[slots [#0 #5] nodes [[id a port #7000 role master]]]]", /* no address */
	"[[slots [#0 #5] nodes [[id a port #7000 ip ? endpoint ? role master]]]]",
	"[[slots [#0 #5] nodes [[id a port #7000 ip h role [master]]]]]",
	"[[slots [#0 #5] nodes [[id a port #7000 ip h role master health #1]]]]",
	"[[slots [#0 #5] nodes [" NODE_M " [id b port #7001 ip h role replica health [x]]]]]",
	/* a slot served by two shards */
	"[[slots [#0 #5] nodes [" NODE_M "]] [slots [#5 #9] nodes "
	"[[id b port #7001 ip h role master]]]]",
	/* one id at two addresses */
	"[[slots [#0 #5] nodes [" NODE_M "]] [slots [#6 #9] nodes "
	"[[id a port #7001 ip h role master]]]]",
	/* one address with two ids */
	"[[slots [#0 #5] nodes [" NODE_M "]] [slots [#6 #9] nodes "
	"[[id b port #7000 ip h role master]]]]",
};

/* CLUSTER SLOTS replies that are wrong somewhere. */
static const char *const bad_slots[] = {
	"#5",
	"[#1]",
	"[[#0 #5]]", /* no primary */
	"[[#0 [h #7000]]]",
	"[[#0 #16384 [h #7000]]]",
	"[[#6 #5 [h #7000]]]",
	"[[0 5 [h #7000]]]",
	"[[#0 #5 h]]",   /* node not a list */
	"[[#0 #5 [h]]]", /* no port */
	"[[#0 #5 [h 7000]]]",
	"[[#0 #5 [h #0]]]",
	"[[#0 #5 [h #65536]]]",
	"[[#0 #5 [#1 #7000]]]",                  /* host an integer */
	"[[#0 #5 [h #7000 #1]]]",                /* id an integer */
	"[[#0 #5 [? #7000]]]",                   /* primary unknown */
	"[[#0 #5 [~ #7000]]]",                   /* NULL, and no host asked */
	"[[#0 #5 [h #7000]] [#5 #6 [g #7001]]]", /* overlap */
	"[[#0 #5 [h #7000] [r #0]]]",            /* replica's port */
	"[[#0 #5 [h #7000] r]]",
};

static void expect_eproto(int rc, const char *cmd, const char *text)
{
	const char *msg = dlock__errmsg_thread();
	cr_assert_eq(rc, DLOCK_EPROTO, "%s: rc %d (%s) for %s", cmd, rc, msg, text);
	cr_assert(strncmp(msg, cmd, strlen(cmd)) == 0, "message \"%s\" for %s", msg, text);
}

Test(slotmap, malformed_shards, .timeout = 10)
{
	for (size_t i = 0; i < sizeof bad_shards / sizeof bad_shards[0]; i++) {
		redisReply *r = reply(bad_shards[i]);
		dlock__slotmap *m = (dlock__slotmap *)1;
		expect_eproto(dlock__slotmap_from_shards(&m, r, NULL, 0), "CLUSTER SHARDS",
				bad_shards[i]);
		cr_assert_null(m);
		freeReplyObject(r);
	}
}

Test(slotmap, malformed_slots, .timeout = 10)
{
	for (size_t i = 0; i < sizeof bad_slots / sizeof bad_slots[0]; i++) {
		redisReply *r = reply(bad_slots[i]);
		dlock__slotmap *m = (dlock__slotmap *)1;
		expect_eproto(dlock__slotmap_from_slots(&m, r, NULL), "CLUSTER SLOTS",
				bad_slots[i]);
		cr_assert_null(m);
		freeReplyObject(r);
	}
}

Test(slotmap, a_message_names_the_place, .timeout = 10)
{
	redisReply *r = reply("[[slots [#0 #5] nodes [" NODE_M "]] [slots [#6 #9] nodes "
			      "[" NODE_M " [id b port #99999 ip h role replica]]]]");
	dlock__slotmap *m;
	cr_assert_eq(dlock__slotmap_from_shards(&m, r, NULL, 0), DLOCK_EPROTO);
	cr_assert_str_eq(dlock__errmsg_thread(),
			"CLUSTER SHARDS: shard 1 node 1: a port is out of range");
	freeReplyObject(r);
}

Test(slotmap, moved, .timeout = 10)
{
	dlock__slotmap *m = slots_ok(slots_ranges, NULL);
	/* To a known primary (host without case). */
	cr_assert_eq(dlock__slotmap_moved(m, 150, "10.0.0.1", 7001), 0);
	expect_owner(m, 150, "10.0.0.1:7001");
	cr_assert_eq(dlock__slotmap_moved(m, 151, "HOST-X", 1), 2);
	cr_assert_eq(dlock__slotmap_moved(m, 152, "host-x", 1), 2);
	/* To a new one: appended, no id, no replicas; indexes stay. */
	cr_assert_eq(dlock__slotmap_moved(m, 16383, "10.0.0.9", 7009), 3);
	cr_assert_eq(dlock__slotmap_count(m), 4);
	expect_owner(m, 16383, "10.0.0.9:7009");
	cr_assert_null(dlock__slotmap_node(m, 3)->id);
	cr_assert_eq(dlock__slotmap_replica_count(m, 3), 0);
	expect_owner(m, 0, "10.0.0.1:7001");
	expect_owner(m, 100, "10.0.0.3:7003");
	cr_assert_eq(dlock__slotmap_covered(m), 301);
	cr_assert_eq(dlock__slotmap_served(m, 1), 97);
	/* Refused, the map unchanged. */
	cr_assert_eq(dlock__slotmap_moved(m, 16384, "h", 1), DLOCK_EINVAL);
	cr_assert_eq(dlock__slotmap_moved(m, 1, "", 1), DLOCK_EINVAL);
	cr_assert_eq(dlock__slotmap_moved(m, 1, NULL, 1), DLOCK_EINVAL);
	cr_assert_eq(dlock__slotmap_moved(m, 1, "h", 0), DLOCK_EINVAL);
	cr_assert_eq(dlock__slotmap_moved(m, 1, "h", 65536), DLOCK_EINVAL);
	cr_assert_eq(dlock__slotmap_moved(NULL, 1, "h", 1), DLOCK_EINVAL);
	cr_assert_eq(dlock__slotmap_count(m), 4);
	expect_owner(m, 1, "10.0.0.1:7001");
	dlock__slotmap_free(m);
}

/* ---- every allocation failing in turn ---------------------------------- */

typedef struct torture_ctx {
	redisReply *shards, *slots;
	dlock__slotmap *m;
	int moved;
} torture_ctx;

static void t_setup(void *p)
{
	torture_ctx *c = p;
	c->m = NULL;
	if (c->moved)
		cr_assert_eq(dlock__slotmap_from_slots(&c->m, c->slots, NULL), 0);
}

static int t_run(void *p)
{
	torture_ctx *c = p;
	if (c->moved) {
		int rc = dlock__slotmap_moved(c->m, 7, "10.9.9.9", 7009);
		return rc < 0 ? rc : 0;
	}
	if (c->shards)
		return dlock__slotmap_from_shards(&c->m, c->shards, NULL, 0);
	return dlock__slotmap_from_slots(&c->m, c->slots, NULL);
}

static void t_check(void *p, int rc, long k)
{
	torture_ctx *c = p;
	if (c->moved) {
		expect_owner(c->m, 7, rc == 0 ? "10.9.9.9:7009" : "127.0.0.1:47101");
		cr_assert_eq(dlock__slotmap_count(c->m), rc == 0 ? 4 : 3, "k=%ld", k);
		return;
	}
	if (rc == 0)
		expect_real_cluster(c->m);
	else
		cr_assert_null(c->m, "k=%ld: no map after a failure", k);
}

static void t_teardown(void *p)
{
	torture_ctx *c = p;
	dlock__slotmap_free(c->m);
	c->m = NULL;
}

static const char *t_errmsg(void *p)
{
	(void)p;
	return dlock__errmsg_thread();
}

Test(slotmap, allocation_failures, .timeout = 60)
{
	dl_torture_install();
	torture_ctx c = { 0 };
	c.shards = resp(real_shards, sizeof real_shards - 1);
	c.slots = resp(real_slots, sizeof real_slots - 1);
	dl_torture t = { "dlock__slotmap_from_shards", t_setup, t_run, t_check, t_teardown,
		t_errmsg };
	dl_torture_run(&t, &c);
	redisReply *shards = c.shards;
	c.shards = NULL;
	t.op = "dlock__slotmap_from_slots";
	dl_torture_run(&t, &c);
	c.moved = 1;
	t.op = "dlock__slotmap_moved";
	dl_torture_run(&t, &c);
	freeReplyObject(shards);
	freeReplyObject(c.slots);
}
