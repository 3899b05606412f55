// product: the extract service's extractor reads JSON-LD, microdata and
// the page's own labels into the schema.org Product fields.
function run(input) {
  const page = fetch(input.url);
  if (page.status >= 400) fail("the page answered HTTP " + page.status);
  const p = extract(page, {
    type: "object",
    properties: {
      name: { type: "string" },
      brand: { type: "string" },
      sku: { type: "string" },
      price: { type: "number" },
      price_currency: { type: "string" },
      availability: { type: "string" },
      rating_value: { type: "number" },
      review_count: { type: "integer" },
      image: { type: "string" },
      description: { type: "string" },
    },
  });
  if (!p.name) { log("no product found on " + page.url); return []; }
  return [{
    name: p.name,
    brand: p.brand,
    sku: p.sku,
    price: p.price,
    currency: p.price_currency,
    availability: p.availability,
    rating: p.rating_value,
    review_count: p.review_count,
    image: p.image,
    description: p.description,
  }];
}
